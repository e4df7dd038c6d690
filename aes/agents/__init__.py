"""Agents that act in a task's container: the terminal agent and its trajectory records."""

from aes.agents.terminal import EndReason, Episode, HostTool, TerminalAgent, parse_action
from aes.agents.trajectory import TrajectoryRecorder, write_json_atomic

__all__ = ["EndReason", "Episode", "HostTool", "TerminalAgent", "TrajectoryRecorder", "parse_action", "write_json_atomic"]
