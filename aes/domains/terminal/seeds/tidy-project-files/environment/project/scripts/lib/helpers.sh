#!/bin/bash
log() { echo "[orbit] $*"; }
