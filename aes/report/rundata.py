"""What a run dir holds, read once for the report and the viewer: metrics rows, the pool (envs,
verdicts, assignments), the solver's rollout index, the proposer's episodes and the config —
and the plain sentences derived from them (why an episode failed, what the pool is made of).

Everything here only reads; a run dir from an older aes (a missing file, a config the schema no
longer takes) gives what can still be read, never an exception.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aes.paths import RunPaths
from aes.report.metrics import read_metrics
from aes.report.page import plural

log = logging.getLogger(__name__)

END_REASONS = {
    "done": "it submitted",
    "max_turns": "it ran out of turns",
    "timeout": "its time budget ran out",
    "token_limit": "it reached its token limit",
    "context_limit": "its context window filled up",
    "format_errors": "its replies held no command in a ```bash block (format errors)",
    "model_error": "a model call failed",
    "budget_exhausted": "the run's budget was spent",
    "container_stopped": "its container stopped",
    "policy_span": "it outlived the policy updates an attempt may see",
}
"""Why an agent episode ended (``aes.agents.terminal.EndReason``), as a reader would say it."""

STAGE_NAMES = {
    "no_draft": "no draft", "static": "static checks", "build": "image build", "oracle": "reference solution",
    "nop": "do-nothing run", "decontam": "decontamination", "review": "review", "calibration": "calibration",
    "reset": "reset check",
}
STATUS_ORDER = {"admitted": 0, "calibrated": 1, "valid": 2, "proposed": 3, "invalid": 4, "retired": 5}
OUTCOMES = {"admitted": "admitted", "valid": "outside the band", "broken": "broken",
            "infrastructure": "infrastructure", "interrupted": "interrupted", "open": "open"}
"""An episode's outcome as the report names it. "valid" is kept for Table 2's checks 1-4 (the valid-env
rate), so the outcome "valid" (checks 1-6 passed, calibration band missed) is "outside the band"."""
STATUS_NAMES = {"admitted": "admitted", "calibrated": "waiting for room", "valid": "outside the band",
                "proposed": "in admission", "invalid": "invalid", "retired": "retired"}
"""A pool status as the report names it (``calibrated``: in the band, the pool was full)."""
INTERRUPTED = "stopped by "
"""How the error of an episode cut short by Ctrl-C or SIGTERM begins (aes.interrupt.Interrupted)."""


def end_reason_text(reason: str | None) -> str:
    if not reason:
        return "it stopped"
    return END_REASONS.get(reason, f"it ended ({reason})")


def stage_text(stage: str | None) -> str:
    return STAGE_NAMES.get(stage or "", stage or "")


def counted(counter: dict[str, int] | Counter) -> str:
    """``{"no_draft": 2, "calibration": 1}`` as ``no draft ×2, calibration``."""
    return ", ".join(f"{stage_text(k)}{f' ×{v}' if v > 1 else ''}" for k, v in counter.items() if v)


def _load_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Rollouts:
    """One env's solver attempts over the run (from ``trajectories/index.jsonl``)."""

    attempts: int = 0
    newest_version: int | None = None
    newest_rewards: list[float] = field(default_factory=list)
    batches: int = 0

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.newest_rewards) if self.newest_rewards else None

    @property
    def std(self) -> float | None:
        return statistics.pstdev(self.newest_rewards) if self.newest_rewards else None


@dataclass
class EnvRow:
    env: Any
    """The pool's :class:`~aes.pool.store.EnvRecord`."""
    verdicts: list[dict]
    rollouts: Rollouts

    @property
    def mean(self) -> float | None:
        return self.env.mean_reward if self.env.mean_reward is not None else self.rollouts.mean

    @property
    def std(self) -> float | None:
        return self.env.std_reward if self.env.std_reward is not None else self.rollouts.std

    @property
    def stats_source(self) -> str:
        if self.env.mean_reward is not None:
            return "calibration" if self.env.status != "retired" else "the refresh that retired it"
        if self.rollouts.newest_rewards:
            return f"newest rollouts (policy v{self.rollouts.newest_version})"
        return ""

    @property
    def failed_stage(self) -> str:
        """The admission stage of the last failed verdict ('' when none failed): its first reason's
        code prefix (``oracle``, ``decontam``, ...) where that names a stage, else the verdict's stage."""
        failed = [v for v in self.verdicts if not v["passed"]]
        if not failed:
            return ""
        last = failed[-1]
        head = str(last["reasons"][0]).split(".", 1)[0] if last["reasons"] else ""
        return head if head in STAGE_NAMES else str(last["stage"])

    @property
    def failure(self) -> str:
        """The first reason of the last failed verdict ('' when none failed)."""
        failed = [v for v in self.verdicts if not v["passed"]]
        if not failed:
            return ""
        last = failed[-1]
        return f"{stage_text(last['stage'])}: {last['reasons'][0]}" if last["reasons"] else stage_text(last["stage"])


@dataclass
class Episode:
    """One proposer episode (one assignment), its outcome and why."""

    assignment_id: str
    round: int
    parent_id: str | None
    parent_name: str | None
    direction: str | None
    status: str
    """closed, open (not finished), infrastructure (cut short, not scored) or interrupted (Ctrl-C or
    SIGTERM cut it short; a resume redoes it)."""
    outcome: str | None
    env_id: str | None
    revisions: int = 0
    failed_stages: list[str] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    harness: str = ""
    turns: int | None = None
    end_reasons: list[str] = field(default_factory=list)
    note: str = ""
    trajectory: Path | None = None
    drafts: list[tuple[str, str]] = field(default_factory=list)
    """(env id, why it failed or '') of every draft the episode handed in, oldest first."""
    reason: str = ""
    """The plain sentence: what became of the episode and why."""
    error: str = ""
    pool_stage: str = ""
    """The stage the pool's verdicts say the finally submitted env failed at ('' when none)."""

    @property
    def failed_stage(self) -> str:
        """The stage the episode's final submission failed at: the trajectory's record, else the pool's."""
        if self.status in ("infrastructure", "interrupted"):
            return self.status
        if self.outcome == "admitted":
            return ""
        return self.failed_stages[-1] if self.failed_stages else self.pool_stage

    @property
    def shown_outcome(self) -> str:
        key = self.outcome or self.status
        return OUTCOMES.get(key, key)


class RunData:
    """Everything the report reads from one run dir."""

    def __init__(self, run_dir: str | Path, pool_envs: list[Any] | None = None):
        self.root = Path(run_dir)
        self.paths = RunPaths(self.root)
        self.rows = read_metrics(self.paths.metrics)
        self.rounds = [r for r in self.rows if r.get("event") == "round"]
        self.updates = [r for r in self.rows if r.get("event") == "update"]
        self.no_updates = [r for r in self.rows if r.get("event") == "no_update"]
        self.refreshes = [r for r in self.rows if r.get("event") == "refresh"]
        self.evals = [r for r in self.rows if r.get("event") == "eval"]
        self.config_text = self.paths.config.read_text() if self.paths.config.is_file() else ""
        self.config = self._config_dict()
        overrides = self.root / ".hydra" / "overrides.yaml"
        self.overrides = self._overrides(overrides)
        self.index_rows = self._index()
        self.rollouts = self._rollouts()
        self.pool = self._pool()
        envs = pool_envs if pool_envs is not None else (self.pool.envs() if self.pool else [])
        self.envs = [EnvRow(e, self.pool.verdicts(e.env_id) if self.pool else [], self.rollouts.get(e.env_id, Rollouts()))
                     for e in envs]
        self.env_by_id = {row.env.env_id: row for row in self.envs}
        self.episodes = self._episodes()
        self.spend = self._spend()
        """The run's model calls over every session (``spend.json``), or None for an older run dir."""

    # -- sources ---------------------------------------------------------------------------
    def _config_dict(self) -> dict:
        if not self.config_text:
            return {}
        from omegaconf import OmegaConf

        try:
            return OmegaConf.to_container(OmegaConf.create(self.config_text), resolve=False) or {}  # type: ignore[return-value]
        except Exception:  # noqa: BLE001
            return {}

    @staticmethod
    def _overrides(path: Path) -> list[str]:
        if not path.is_file():
            return []
        from omegaconf import OmegaConf

        try:
            return [str(o) for o in OmegaConf.to_container(OmegaConf.load(path)) or []]  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            return []

    def _spend(self) -> dict | None:
        data = _load_json(self.paths.spend)
        return data if data and "tokens" in data else None

    def sizes(self) -> str:
        """The effective sizes block (:func:`aes.report.sizes.describe_sizes`) of the run's config,
        or a sentence saying why it cannot be had."""
        if not self.config_text:
            return "no config.yaml in the run dir"
        from omegaconf import OmegaConf

        from aes.config import load_config
        from aes.report.sizes import describe_sizes

        try:
            return describe_sizes(load_config(OmegaConf.create(self.config_text)))
        except Exception as exc:  # noqa: BLE001 - a run of an older aes: its config may not load now
            return f"the sizes summary is not available: this config.yaml does not load with this aes ({exc})"

    def _index(self) -> list[dict]:
        rows = []
        if self.paths.index.is_file():
            for line in self.paths.index.read_text().splitlines():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
        return rows

    @property
    def tampered(self) -> int:
        """Solver attempts the tamper audit ended as tampered (their failure is ``trial tampered``)."""
        return sum(int((row.get("failures") or {}).get("trial tampered", 0)) for row in self.index_rows)

    def _rollouts(self) -> dict[str, Rollouts]:
        by_env: dict[str, list[dict]] = defaultdict(list)
        for row in self.index_rows:
            if row.get("env_id"):
                by_env[row["env_id"]].append(row)
        out = {}
        for env_id, rows in by_env.items():
            newest = max(int(r.get("policy_version") or 0) for r in rows)
            out[env_id] = Rollouts(
                attempts=sum(int(r.get("attempts") or len(r.get("rewards", []))) for r in rows),
                newest_version=newest, batches=len(rows),
                newest_rewards=[x for r in rows if int(r.get("policy_version") or 0) == newest
                                for x in r.get("rewards", []) if isinstance(x, (int, float))])
        return out

    def _pool(self):
        if not (self.paths.pool / "pool.sqlite").is_file():
            return None
        from aes.pool import PoolStore

        try:
            return PoolStore(self.paths.pool)
        except Exception as exc:  # noqa: BLE001
            log.warning("report: cannot open the pool at %s: %s", self.paths.pool, exc)
            return None

    def _assignment_rows(self) -> list[dict]:
        if self.pool is None:
            return []
        from aes.pool import AssignmentLog

        return AssignmentLog(self.pool).rows()

    def _episodes(self) -> list[Episode]:
        files: dict[str, tuple[str, Path]] = {}
        for status, folder in (("infrastructure", self.paths.infrastructure_failures),
                               ("closed", self.paths.proposer_trajectories)):
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                files[path.stem] = (status, path)  # a finished episode wins over an earlier cut-short one
        episodes, seen = [], set()
        for row in self._assignment_rows():
            aid = row["assignment_id"]
            seen.add(aid)
            status, path = files.get(aid, ("open" if row["status"] == "open" else "closed", None))
            episodes.append(self._episode(aid, row, status, path))
        for aid, (status, path) in files.items():  # trajectories without a pool row (e.g. copied run dirs)
            if aid not in seen:
                episodes.append(self._episode(aid, None, status, path))
        return episodes

    def _episode(self, aid: str, row: dict | None, status: str, path: Path | None) -> Episode:
        data = _load_json(path) if path else None
        extra = (data or {}).get("extra") or {}
        spec = (row or {}).get("spec") or extra.get("assignment") or {}
        steps = (data or {}).get("steps") or []
        ep = Episode(
            assignment_id=aid, round=int((row or {}).get("round", spec.get("round", 0)) or 0),
            parent_id=(row or {}).get("parent_id") or spec.get("parent_env_id"), parent_name=spec.get("parent_name"),
            direction=spec.get("direction"), status=status,
            outcome=None if status in ("open", "infrastructure") else ((row or {}).get("outcome") or extra.get("outcome")),
            env_id=(row or {}).get("result_env_id") or extra.get("env_id"),
            revisions=int(extra.get("revisions") or 0), failed_stages=list(extra.get("failed_stages") or []),
            tokens=int((row or {}).get("tokens") or 0), cost_usd=float((row or {}).get("cost_usd") or 0.0),
            harness=str(extra.get("harness") or ""), note=str(extra.get("note") or ""),
            turns=extra.get("turns") if isinstance(extra.get("turns"), int) else (
                sum(s.get("source") == "agent" for s in steps) if steps else None),
            end_reasons=[str(r) for r in (extra.get("end_reasons") or [])], trajectory=path,
            error=str(extra.get("infrastructure_error") or extra.get("error") or ""))
        if ep.status == "infrastructure" and ep.error.startswith(INTERRUPTED):
            ep.status = "interrupted"
        drafts = [r for r in self.envs if r.env.assignment_id == aid]
        if ep.env_id and ep.env_id in self.env_by_id and all(r.env.env_id != ep.env_id for r in drafts):
            drafts.append(self.env_by_id[ep.env_id])
        ep.drafts = [(r.env.env_id, r.failure) for r in drafts]
        final = self.env_by_id.get(ep.env_id) if ep.env_id else None
        ep.pool_stage = final.failed_stage if final is not None else ""
        ep.reason = self._reason(ep)
        return ep

    # -- sentences ---------------------------------------------------------------------------
    def _reason(self, ep: Episode) -> str:
        tries = ep.revisions + 1
        if ep.status == "open":
            return "not finished: the assignment is still open (a rerun of this run dir redoes it)"
        if ep.status == "infrastructure":
            return f"cut short by the infrastructure, not scored: {ep.error or 'see its partial trajectory'}"
        if ep.status == "interrupted":
            return (f"interrupted ({ep.error[len(INTERRUPTED):]}), not scored: the assignment stays open and a resume "
                    "redoes it")
        final = self.env_by_id.get(ep.env_id) if ep.env_id else None
        earlier = [f"{stage_text(s)}" for s in ep.failed_stages]
        if ep.outcome == "admitted" and final is not None:
            cal = [v for v in final.verdicts if v["stage"] == "calibration" and v["passed"]]
            details = cal[-1]["details"] if cal else {}
            mean, std = details.get("mean", final.mean), details.get("std", final.std)
            attempts = len(details.get("rewards") or [])
            text = (f"admitted: mean reward {_f(mean)}, std {_f(std)} in calibration"
                    + (f" ({plural(attempts, 'solver attempt')})" if attempts else ""))
            if ep.revisions:
                text += (f", after {plural(ep.revisions, 'revision')} (earlier draft{'s' if len(earlier) > 1 else ''} "
                         f"failed at {', '.join(earlier)})")
            if final.env.status == "retired":
                text += "; retired since by a pool refresh"
            return text
        if final is not None:
            why = final.failure or f"failed at {stage_text(ep.failed_stage) or 'an admission check'}"
            verb = "passed checks 1-6 but not admitted" if ep.outcome == "valid" else "broken"
            text = f"{verb}: {why}"
            if ep.revisions:
                text += f" (after {plural(ep.revisions, 'revision')}; stages failed: {counted(Counter(ep.failed_stages))})"
            return text
        if ep.failed_stages and all(s == "no_draft" for s in ep.failed_stages):
            return self._no_draft(ep, tries)
        if ep.failed_stages:
            return f"{ep.outcome or 'broken'}: failed at {counted(Counter(ep.failed_stages))}"
        return ep.note or (ep.outcome or "no outcome recorded")

    @staticmethod
    def _no_draft(ep: Episode, tries: int) -> str:
        if ep.harness in ("prompt", "prompt_feedback"):
            what = ep.note or "its reply held no task files"
            return f"the proposer wrote no task files in {plural(tries, 'generation')}: {what}"
        turns = f" in {plural(ep.turns, 'turn')}" if ep.turns is not None else ""
        text = f"the proposer wrote no task files{turns}"
        if tries > 1:
            text += f" over {tries} tries (the first and {plural(tries - 1, 'revision')})"
        reasons = ep.end_reasons
        if reasons and len(set(reasons)) == 1:
            lead = "each try ended: " if len(reasons) > 1 else "the episode ended: "
            text += f"; {lead}{end_reason_text(reasons[0])}"
        elif reasons:
            text += "; the tries ended: " + "; ".join(end_reason_text(r) for r in reasons)
        elif ep.note:
            text += f" ({ep.note})"
        return text

    def pool_sentence(self) -> str:
        """What the pool holds, e.g. 'no calibrated envs yet: 15 seed envs are admitted'."""
        admitted = [r for r in self.envs if r.env.status == "admitted"]
        seeds = [r for r in admitted if r.env.source == "seed"]
        proposed = [r for r in admitted if r.env.source != "seed"]
        counts = Counter(r.env.status for r in self.envs)
        if not self.envs:
            return "The pool is empty: no env was seeded or proposed."
        text = f"The pool holds {plural(len(admitted), 'admitted env')}"
        if admitted:
            text += f": {plural(len(seeds), 'seed')} and {len(proposed)} from the proposer"
        calibrated = [r for r in admitted if r.env.mean_reward is not None]
        if not calibrated:
            text += (f". No calibrated envs yet: {plural(len(seeds), 'seed env')} {'is' if len(seeds) == 1 else 'are'} "
                     "admitted (seeds join the pool without calibration)" if seeds else ". No calibrated envs yet")
        names = {"retired": "retired", "valid": "accepted but outside the band", "invalid": "invalid",
                 "proposed": "still in admission", "calibrated": "in the band, waiting for room in the pool"}
        others = [f"{counts[s]} {names[s]}" for s in names if counts.get(s)]
        if others:
            text += f"; besides them {', '.join(others)}"
        return text + "."


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
