"""The scripted proposer harness of the simulated flywheel (``harness=scripted``).

It writes a real Harbor task directory (so the static checks and the pool treat it as any
other) whose ``[metadata] sim_difficulty`` follows the assignment, as a proposer that reads the
solver's rollouts would: from the solver's mean reward ``m`` on the parent it aims at the
difficulty where the solver would pass half the tests (the parent's difficulty plus
``logit(m) / 2``, with some noise) — harder than the parent when the solver succeeds on it,
simpler when it fails. One draft in ten is broken (its reference fails). Admission feedback
moves the next revision: below the calibration band simpler, above it harder, broken fixed.
"""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path

from aes.proposer.assignments import HARDER, Assignment
from aes.proposer.workspace import Workspace
from aes.sandbox.simulated import LABELS
from aes.tasks import load_task

STEP = 0.5
BROKEN_RATE = 0.1


class ScriptedHarness:
    name = "scripted"

    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        self.tokens, self.cost_usd, self.note = 0, 0.0, ""
        self.assignment: Assignment | None = None
        self.workspace: Workspace | None = None
        self.level = 0.0
        self.broken = False
        self.drafts = 0
        self.rng = random.Random(0)

    def start(self, assignment: Assignment, workspace: Workspace) -> Path | None:
        self.assignment, self.workspace = assignment, workspace
        seed = hashlib.sha256(assignment.assignment_id.encode()).digest()
        self.rng = random.Random(int.from_bytes(seed[:8], "big"))
        parent = load_task(workspace.root / "past_environments" / assignment.parent_env_id)
        meta = parent.spec.metadata or {}
        base = float(meta["sim_difficulty"]) if "sim_difficulty" in meta else LABELS.get(
            str(meta.get("difficulty", "medium")).lower(), 1.0)
        if assignment.mean_reward is None:
            shift = STEP if assignment.direction == HARDER else -STEP
        else:
            m = min(max(assignment.mean_reward, 0.05), 0.95)
            shift = math.log(m / (1.0 - m)) / 2.0
        self.level = base + shift + self.rng.gauss(0.0, 0.3)
        self.broken = self.rng.random() < BROKEN_RATE
        return self._write()

    def revise(self, feedback: str) -> Path | None:
        if "too_hard" in feedback:
            self.level -= 2 * STEP
        elif "too_easy" in feedback:
            self.level += 2 * STEP
        self.broken = False
        return self._write()

    def _write(self) -> Path:
        assert self.workspace is not None and self.assignment is not None
        self.drafts += 1
        draft = self.workspace.new_draft_dir()
        name = f"sim/{self.assignment.assignment_id.lower().replace('_', '-')}-{self.drafts}"
        (draft / "environment").mkdir()
        (draft / "solution").mkdir()
        (draft / "tests").mkdir()
        (draft / "instruction.md").write_text(f"Simulated task at difficulty {self.level:.2f} "
                                              f"({self.assignment.direction} than {self.assignment.parent_name}).\n")
        (draft / "task.toml").write_text(
            f'[task]\nname = "{name}"\n\n[metadata]\nsim_difficulty = {self.level:.3f}\n'
            f'sim_broken = {str(self.broken).lower()}\n\n[environment]\nnetwork_mode = "no-network"\n')
        (draft / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\n")
        (draft / "solution" / "solve.sh").write_text("#!/bin/bash\necho solved > /app/out.txt\n")
        (draft / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
        return draft

    def trajectory(self, **extra) -> dict:
        return {"schema_version": "ATIF-v1.8", "agent": {"name": "aes-proposer-scripted"}, "steps": [],
                "extra": {"harness": self.name, "note": self.note, **extra}}

    def close(self) -> None:
        pass
