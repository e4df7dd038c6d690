"""Output capture without Docker: the capped buffer and the stream demultiplexer."""

from __future__ import annotations

import struct

from aes.sandbox.container import CappedOutput, _Frames
from aes.sandbox.trial import parse_reward_json, parse_reward_txt

import pytest


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxI", stream, len(data)) + data


def test_capped_output_keeps_head_and_tail():
    out = CappedOutput(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        out.write(chunk)
    assert out.head == b"abcde" and out.tail == b"vwxyz" and out.dropped == 16
    assert out.text().startswith("abcde") and out.text().endswith("vwxyz") and "16 bytes" in out.text()


def test_small_output_is_untouched():
    out = CappedOutput(100)
    out.write("héllo".encode())
    assert out.text() == "héllo" and out.dropped == 0


def test_frames_split_anywhere_are_reassembled():
    stream = frame(1, b"hello ") + frame(2, b"err ") + frame(1, b"world")
    for cut in range(1, len(stream)):
        out = CappedOutput(1000)
        parser = _Frames(out)
        parser.feed(stream[:cut])
        parser.feed(stream[cut:])
        assert out.text() == "hello err world"


def test_reward_parsers():
    assert parse_reward_txt(b" 0.5\n") == {"reward": 0.5}
    assert parse_reward_json(b'{"reward": 1, "tests": 3}') == {"reward": 1.0, "tests": 3.0}
    for bad in (b"", b"nan", b"inf", b"1 2", b"\xff"):
        with pytest.raises(ValueError):
            parse_reward_txt(bad)
    for bad in (b"[1]", b'{"score": 1}', b'{"reward": true}', b'{"reward": {"a": 1}}', b"{"):
        with pytest.raises(ValueError):
            parse_reward_json(bad)
