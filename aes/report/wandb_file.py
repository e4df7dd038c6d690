"""Read back what an offline wandb run wrote: its ``run-<id>.wandb`` file.

The file is wandb's transaction log: a 7-byte header (``:W&B``, magic 0xBEE1, version) and then
LevelDB's log format (32 KiB blocks of records with a CRC-32, a length and a FULL / FIRST /
MIDDLE / LAST type), each record one ``wandb.proto.wandb_internal_pb2.Record``. wandb 0.31
reads it in its Go core only, so this is the same format read from Python, decoded with wandb's
own protobuf classes: tests use it to check that every metrics row, the config, the run's group
and the report artifact arrived (``wandb sync`` uploads the same records).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

HEADER = struct.Struct("<4sHB")
RECORD = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    """Not a wandb transaction log, or a damaged one."""


def records(path: str | Path) -> Iterator[Any]:
    """Every ``Record`` of a ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if len(data) < HEADER.size:
        raise WandbFileError(f"{path}: too short for a wandb file")
    ident, magic, _version = HEADER.unpack_from(data)
    if ident != b":W&B" or magic != 0xBEE1:
        raise WandbFileError(f"{path}: not a wandb transaction log (header {data[:7]!r})")
    pos, pending = HEADER.size, b""
    while pos + RECORD.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        crc, length, kind = RECORD.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding up to the end of the block
            pos += left
            continue
        chunk = data[pos + RECORD.size:pos + RECORD.size + length]
        if len(chunk) < length:
            break  # a torn last record of a killed writer
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise WandbFileError(f"{path}: bad checksum at byte {pos}")
        pos += RECORD.size + length
        if kind in (FULL, FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


@dataclass
class WandbRun:
    """What one offline run holds: its identity, config, history rows, summary and artifacts."""

    run_id: str = ""
    project: str = ""
    group: str = ""
    name: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    """One dict per logged step: ``_step`` and every key (nested keys joined with ``/``)."""
    summary: dict[str, Any] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    """``{"name", "type", "files"}`` of every logged artifact."""


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(path: str | Path) -> WandbRun:
    """Decode a ``.wandb`` file (or the offline run dir holding one) into a :class:`WandbRun`."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.wandb"))
        if not found:
            raise WandbFileError(f"no .wandb file in {path}")
        path = found[0]
    run = WandbRun()
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group = r.run_id, r.project, r.run_group
            run.name, run.job_type, run.tags = r.display_name, r.job_type, list(r.tags)
            for item in r.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = json.loads(item.value_json)
        elif kind == "artifact":
            a = record.artifact
            run.artifacts.append({"name": a.name, "type": a.type,
                                  "files": [m.path for m in a.manifest.contents]})
    return run


def offline_runs(root: str | Path) -> list[Path]:
    """The offline run dirs wandb made under ``root`` (``root/wandb/offline-run-*``), oldest first."""
    return sorted(p for p in Path(root).glob("wandb/offline-run-*") if p.is_dir())
