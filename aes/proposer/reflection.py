"""Harness optimization between rounds (paper §3.3, "Following Continual").

After a generation the proposer gets its past rewards, verdicts and logs and may edit what it
keeps across rounds — ``memory/``, ``skills/`` and ``tools/`` under ``RUN_DIR/proposer/`` —
while its instructions and the admission checks stay fixed and out of its reach (they are not
in the reflection workspace at all, or read-only). The diff each reflection made is kept per
round in ``RUN_DIR/proposer/reflection/round_NNN.diff``.

What it gets, per round, in ``RUN_DIR/proposer/history/``: ``round_NNN.md`` with each episode's
assignment, the reward r_P of the env it finally submitted, its revisions, the stages its drafts
failed, the verdict reasons (``oracle.reward_below_one: ...``), the feedback admission sent after
each submission and the path of the episode's log; the logs themselves beside it
(``round_NNN/<assignment>.json``: the whole episode trajectory, and the diagnostic solver run a
draft below the band got, ``round_NNN/<assignment>.diagnostics/``).

The terminal harness reflects as an agent in its sandbox (history read-only at
/workspace/history/, memory/skills/tools writable); the prompt harnesses in one model call that
is shown the last rounds' history and rewrites ``memory/notes.md``; the scripted (simulated)
proposer appends a line of statistics.
"""

from __future__ import annotations

import difflib
import json
import logging
import shutil
import time
from pathlib import Path

from aes.agents import Episode, write_json_atomic
from aes.models import ModelError, ModelUnavailable
from aes.proposer.workspace import PERSISTENT

log = logging.getLogger(__name__)
MAX_FILE_CHARS = 20000
NOTES_CHARS = 8000

REFLECT = """\
# Reflection after round {round}

Your past rounds are in /workspace/history/: one file per round (round_NNN.md) with each episode's
assignment, the reward r_P of the task it finally submitted (0 broken, {partial} valid but not
admitted, 1 admitted), the stages its drafts failed, the verdict reasons and the feedback admission
sent after each submission; each episode's whole log is the JSON file its entry names (under
/workspace/history/round_NNN/). Your rewards so far: {rewards}.

Improve what you keep for the next rounds: /workspace/memory/ (notes), /workspace/skills/ (how you
build and check a task: write short markdown skills), /workspace/tools/ (helper scripts you can run
in later episodes). Edit them so your next tasks pass admission and land in the calibration band
more often. The instructions and admission checks do not change. Submit when done."""

PROMPT_REFLECT = """\
{history}

Your notes from earlier rounds:
{notes}

Rewrite your notes for the next rounds: what made tasks fail admission or calibration, and what to do
differently. Reply with the complete new notes only."""


def reflect(stack, round_: int, results: list) -> dict:
    """Run the reflection of ``round_``; metrics of what changed."""
    paths = stack.paths
    keep = {name: paths.proposer / name for name in PERSISTENT}
    for folder in keep.values():
        folder.mkdir(parents=True, exist_ok=True)
    history = _write_history(paths, round_, results, stack.cfg.trainer.proposer_partial_reward,
                             "/workspace/history" if stack.cfg.harness.name == "terminal" else None,
                             stack.cfg.harness.solver_feedback)
    before = _snapshot(keep)
    started = time.monotonic()
    try:
        if stack.cfg.harness.name == "terminal":
            _in_sandbox(stack, round_, keep, history)
        elif stack.cfg.harness.name == "scripted":
            _scripted(keep, round_, results)
        else:
            _by_prompt(stack, keep, history)
    except ModelUnavailable:
        raise
    except ModelError as exc:
        log.warning("reflection after round %d: the model failed (%s); memory and tools are unchanged", round_ + 1, exc)
    diff = _diff(before, _snapshot(keep))
    paths.reflection.mkdir(parents=True, exist_ok=True)
    (paths.reflection / f"round_{round_:03d}.diff").write_text(diff)
    changed = diff.count("\n+++ ")
    log.info("reflection after round %d: %d file(s) of memory/skills/tools changed (%s)", round_ + 1, changed,
             paths.reflection / f"round_{round_:03d}.diff")
    return {"reflection/files_changed": changed, "reflection/seconds": round(time.monotonic() - started, 2)}


def _write_history(paths, round_: int, results: list, partial: float, logs_at: str | None = None,
                   solver_feedback: bool = True) -> Path:
    """``round_NNN.md`` and the episodes' logs beside it in ``paths.history``; ``logs_at`` is where the
    reflection sees that folder (``/workspace/history`` in the terminal harness's sandbox; default:
    the folder itself). Without ``solver_feedback`` (Table 3's ablation) nothing of the solver's
    results is written: no mean reward, no direction, no diagnostic runs (the episodes' feedback and
    logs were already written without them, :func:`aes.proposer.episode.run_episode`)."""
    folder = paths.history
    folder.mkdir(parents=True, exist_ok=True)
    rewards = {"broken": 0.0, "valid": partial, "admitted": 1.0}
    name = f"round_{round_ + 1:03d}"
    logs = folder / name
    logs.mkdir(exist_ok=True)
    shown = f"{logs_at or folder}/{name}"
    lines = [f"# Round {round_ + 1}\n"]
    for r in results:
        a = r.assignment
        solver = (f" ({a.direction}; solver mean {a.mean_reward if a.mean_reward is not None else 'unknown'})"
                  if solver_feedback else "")
        lines.append(f"## {a.assignment_id}: parent {a.parent_name}{solver}\n"
                     f"- outcome: {r.outcome} (r_P = {rewards.get(r.outcome, 0.0)}), revisions {r.revisions}\n"
                     f"- failed stages: {', '.join(r.failed_stages) or 'none'}\n"
                     f"- verdict reasons: {'none' if not r.reasons else ''}")
        lines += [f"  - {reason}" for reason in r.reasons]
        diagnostics = (_copy_diagnostics(paths.workspaces / a.assignment_id, a.assignment_id, logs)
                       if solver_feedback else {})
        for i, text in enumerate(getattr(r, "feedback", []) or []):
            for old, new in diagnostics.items():
                text = text.replace(old, f"{shown}/{new}")
            lines.append(f"- feedback after submission {i + 1}:\n" + "\n".join(f"    {line}" for line in text.splitlines()))
        extra = {}
        if r.trajectory_path and Path(r.trajectory_path).is_file():
            shutil.copy2(r.trajectory_path, logs / f"{a.assignment_id}.json")
            lines.append(f"- episode log: {shown}/{a.assignment_id}.json")
            extra = json.loads(Path(r.trajectory_path).read_text()).get("extra") or {}
        if extra.get("note"):
            lines.append(f"- note: {extra['note']}")
        lines.append("")
    (folder / f"{name}.md").write_text("\n".join(lines))
    return folder


def _copy_diagnostics(workspace: Path, assignment_id: str, logs: Path) -> dict[str, str]:
    """The diagnostic solver runs the episode's feedback points to (in its workspace), copied into
    the history; their workspace path -> the path under ``logs``."""
    found = {}
    for file in sorted((workspace / "past_trajectories" / "diagnostics").glob("*.json")):
        target = logs / f"{assignment_id}.diagnostics" / file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
        found[f"/workspace/past_trajectories/diagnostics/{file.name}"] = f"{target.parent.name}/{file.name}"
    return found


def _rewards_so_far(history: Path) -> str:
    counts = []
    for file in sorted(history.glob("round_*.md")):
        text = file.read_text()
        n = text.count("\n## ")
        admitted = text.count("outcome: admitted")
        counts.append(f"{file.stem}: {admitted}/{n} admitted")
    return "; ".join(counts) or "none"


def _snapshot(keep: dict[str, Path]) -> dict[str, str]:
    out = {}
    for name, folder in keep.items():
        for file in sorted(folder.rglob("*")):
            if file.is_file() and not file.is_symlink():
                with open(file, "rb") as fh:
                    out[f"{name}/{file.relative_to(folder)}"] = fh.read(MAX_FILE_CHARS).decode("utf-8", "replace")
    return out


def _diff(before: dict[str, str], after: dict[str, str]) -> str:
    out = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, ""), after.get(name, "")
        if old != new:
            out += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{name}" if name in before else "/dev/null",
                                        f"b/{name}" if name in after else "/dev/null")
    return "".join(out)


def _in_sandbox(stack, round_: int, keep: dict[str, Path], history: Path) -> None:
    """An agent episode with the history read-only and memory/skills/tools writable."""
    from aes.config import AgentConfig

    root = stack.paths.reflection / f"round_{round_:03d}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cfg = stack.cfg
    mounts = {str(root): ("/workspace", "rw"), str(history): ("/workspace/history", "ro")}
    mounts.update({str(folder): (f"/workspace/{name}", "rw") for name, folder in keep.items()})
    sandbox = stack.rollouts.trials.sandbox
    container = sandbox.run_container(cfg.sandbox.base_image, cpus=cfg.harness.cpus, memory_mb=cfg.harness.memory_mb,
                                      network="none", workdir="/workspace", mounts=mounts, role="proposer",
                                      label=f"reflection-{round_}")
    try:
        agent_cfg = AgentConfig(**{**cfg.agent.__dict__, "max_turns": cfg.harness.max_turns or cfg.agent.max_turns,
                                   "system_prompt": None})
        brief = REFLECT.format(round=round_ + 1, partial=cfg.trainer.proposer_partial_reward,
                               rewards=_rewards_so_far(history))
        episode = Episode(stack.proposer, agent_cfg, container, brief, agent_name="aes-proposer-reflection")
        end = episode.send("Start by reading /workspace/history/.", time.monotonic() + cfg.harness.episode_timeout_sec)
        write_json_atomic(stack.paths.reflection / f"round_{round_:03d}.json", episode.trajectory(end_reason=end))
    finally:
        container.remove()


def _by_prompt(stack, keep: dict[str, Path], history: Path) -> None:
    notes = keep["memory"] / "notes.md"
    text = "\n".join(f.read_text()[:NOTES_CHARS] for f in sorted(history.glob("round_*.md"))[-3:])
    prompt = PROMPT_REFLECT.format(history=text, notes=(notes.read_text() if notes.exists() else "")[:NOTES_CHARS])
    result = stack.proposer.chat([{"role": "user", "content": prompt}])
    if result.text.strip():
        notes.write_text(result.text.strip()[:NOTES_CHARS] + "\n")


def _scripted(keep: dict[str, Path], round_: int, results: list) -> None:
    admitted = sum(r.outcome == "admitted" for r in results)
    with open(keep["memory"] / "notes.md", "a") as fh:
        fh.write(f"- round {round_ + 1}: {admitted}/{len(results)} admitted\n")
