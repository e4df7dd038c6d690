"""Where everything of a run lives, in one place.

::

    RUN_DIR/
      config.yaml  metrics.jsonl  report.html
      spend.json                     USD, tokens and model calls of every session of the run
      .lock                          held by the run writing here (aes/rundir.py)
      pool/                          the pool database and content-addressed task files
      trajectories/                  every solver attempt (one record: index.jsonl), the
        <env_id>/<solver>/[<batch>/]<attempt>.json    proposer's solver_model probes included
      proposer/
        workspaces/<assignment>/     one per proposer episode
        memory/ tools/ skills/       what the proposer keeps and edits across rounds
        proposer_trajectories/       one per finished episode (r_P is read from these)
        infrastructure_failures/     episodes the infrastructure cut short (never scored)
        history/                     what each reflection reads: round_NNN.md and the episodes' logs
        reflection/                  the diff each reflection made to memory/tools/skills
      checkpoints/                   trainer state (resumable) and exported weights
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


PROPOSER_TRAJECTORIES = "proposer_trajectories"
INDEX = "index.jsonl"
"""The one record of rollouts, in ``trajectories/`` (and in a proposer workspace's ``past_trajectories/``)."""
INFRASTRUCTURE_FAILURES = "infrastructure_failures"
PROBE = "probe"
"""``trajectories/probe-<hash>/`` (batch ``...-probe``): the proposer's ``solver_model`` runs on its
drafts (aes/proposer/tools.py), in the one index like every attempt; no pool env, never trained on."""


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run dir."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def spend(self) -> Path:
        return self.root / "spend.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def pool(self) -> Path:
        return self.root / "pool"

    @property
    def trajectories(self) -> Path:
        return self.root / "trajectories"

    @property
    def index(self) -> Path:
        return self.trajectories / INDEX

    @property
    def proposer(self) -> Path:
        return self.root / "proposer"

    @property
    def workspaces(self) -> Path:
        return self.proposer / "workspaces"

    @property
    def proposer_trajectories(self) -> Path:
        return self.proposer / PROPOSER_TRAJECTORIES

    @property
    def infrastructure_failures(self) -> Path:
        return self.proposer / INFRASTRUCTURE_FAILURES

    @property
    def history(self) -> Path:
        return self.proposer / "history"

    @property
    def reflection(self) -> Path:
        return self.proposer / "reflection"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def gguf(self) -> Path:
        return self.checkpoints / "gguf"


def disk_usage(root: Path) -> tuple[int, dict[str, int]]:
    """Bytes of disk that ``root`` takes (allocated blocks, as ``du`` counts them; links not followed),
    in all and per top-level entry."""
    import os

    def used(path: Path) -> int:
        info = os.lstat(path)
        size = info.st_blocks * 512
        if path.is_dir() and not path.is_symlink():
            for base, dirs, files in os.walk(path):
                size += sum(os.lstat(os.path.join(base, name)).st_blocks * 512 for name in dirs + files)
        return size

    root = Path(root)
    if not root.is_dir():
        return 0, {}
    parts = {entry.name + ("/" if entry.is_dir() and not entry.is_symlink() else ""): used(entry)
             for entry in sorted(root.iterdir())}
    return os.lstat(root).st_blocks * 512 + sum(parts.values()), parts


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KB``; decimal units, as ``du -h --si`` prints them."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def size_line(root: Path, top: int = 3) -> str:
    """The run dir's size, its largest parts first: ``RUN_DIR: 2.1 GB (checkpoints/ 1.6 GB, ...)``."""
    total, parts = disk_usage(root)
    largest = sorted(parts.items(), key=lambda kv: -kv[1])[:top]
    return f"{root}: {human_bytes(total)} (" + ", ".join(f"{k} {human_bytes(v)}" for k, v in largest) + ")"
