"""A proposer episode's workspace (DESIGN.md §Proposer).

::

    instructions/           how to write a task, what to build, the assignment   (read-only)
                            + the shared docs (aes.proposer.instructions: reward_spread.md,
                            admission.md and workflow.md, rendered from the run's config)
      kit/                  files a task copies verbatim (aes/domains/kit/ and the domain's kit/)
    past_trajectories/      index.jsonl + <env_id>/<solver>/*.json                (read-only)
    past_environments/      <env_id>/ task files of the parent and a few others   (read-only)
    memory/ tools/ skills/  persist across rounds of a run; the proposer may edit them (and
                            does, between rounds, in its reflection: aes.proposer.reflection)
    env_001/ env_002/ ...   the proposer's drafts (one per revision)

The read-only parts are mounted read-only into the terminal harness's container; the
admission checks run on the host and are out of the proposer's reach altogether.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from aes.paths import INDEX
from aes.pool import PoolStore
from aes.proposer.assignments import Assignment
from aes.rollout.index import latest_rows, read_index

KIT = Path(__file__).resolve().parents[1] / "domains" / "kit"
"""Files tasks copy byte for byte (the untrusted-code runner of the swe and gpu_kernels tests)."""
READ_ONLY = ("instructions", "past_trajectories", "past_environments")
MAX_TRAJECTORIES = 8
OTHER_ENVS = 3


PERSISTENT = ("memory", "tools", "skills")


@dataclass
class Workspace:
    root: Path
    memory: Path
    tools: Path
    skills: Path | None = None

    @property
    def drafts(self) -> list[Path]:
        return sorted(p for p in self.root.glob("env_[0-9][0-9][0-9]") if p.is_dir())

    def new_draft_dir(self) -> Path:
        path = self.root / f"env_{len(self.drafts) + 1:03d}"
        path.mkdir()
        return path

    def latest_draft(self) -> Path | None:
        drafts = [d for d in self.drafts if (d / "task.toml").exists()]
        return drafts[-1] if drafts else None

    def resolve_draft(self, name: str | None) -> Path | None:
        """A draft dir named by the proposer (``env_002``), or the latest one; never outside the root."""
        if not name:
            return self.latest_draft()
        path = (self.root / name.strip().strip("/").removeprefix("/workspace/")).resolve()
        return path if path.is_relative_to(self.root.resolve()) and path.is_dir() else None


def kit_files(instructions: Path) -> list[Path]:
    """The kit a domain's tasks may copy: the shared kit, then the domain's own ``kit/``
    (beside its ``instructions/``)."""
    return [*sorted(KIT.glob("*.py")), *sorted(p for p in (instructions.parent / "kit").glob("*") if p.is_file())]


def build_workspace(root: Path, assignment: Assignment, pool: PoolStore, trajectories: Path,
                    instructions: Path, persistent: Path, solver_feedback: bool = True,
                    docs: dict[str, str] | None = None) -> Workspace:
    """Lay out a fresh workspace for ``assignment``; ``persistent`` holds memory/ and tools/;
    ``docs`` (file name -> text) join the domain's instructions.

    Without ``solver_feedback`` the proposer sees no trajectories and no solver statistics.
    """
    if root.exists():
        shutil.rmtree(root)
    (root / "instructions").mkdir(parents=True)
    for doc in sorted(instructions.glob("*.md")):
        shutil.copy2(doc, root / "instructions" / doc.name)
    for name, text in (docs or {}).items():
        (root / "instructions" / name).write_text(text)
    (root / "instructions" / "ASSIGNMENT.md").write_text(assignment.brief(solver_feedback))
    (root / "instructions" / "kit").mkdir()
    for kit in kit_files(instructions):
        shutil.copy2(kit, root / "instructions" / "kit" / kit.name)
    _copy_environments(root / "past_environments", pool, assignment.parent_env_id)
    if solver_feedback:
        _copy_trajectories(root / "past_trajectories", trajectories, assignment)
    else:
        (root / "past_trajectories").mkdir()
    for name in PERSISTENT:
        (persistent / name).mkdir(parents=True, exist_ok=True)
    notes = persistent / "memory" / "notes.md"
    if not notes.exists():
        notes.write_text("# Proposer notes\n\nWhat worked, what failed admission and why.\n")
    return Workspace(root=root, memory=persistent / "memory", tools=persistent / "tools",
                     skills=persistent / "skills")


def _copy_environments(dest: Path, pool: PoolStore, parent_id: str) -> None:
    dest.mkdir(parents=True)
    admitted = [e for e in pool.envs("admitted") if e.env_id != parent_id][-OTHER_ENVS:]
    for env in [pool.get(parent_id), *admitted]:
        shutil.copytree(env.path, dest / env.env_id, symlinks=True)


def _copy_trajectories(dest: Path, source: Path, assignment: Assignment) -> None:
    """The solver's newest rollouts: ``index.jsonl`` (one merged row per env, of the newest policy
    version) and the parent's trajectory files, numbered ``0.json`` ... in the workspace."""
    dest.mkdir(parents=True)
    rows = latest_rows(read_index(source / INDEX), assignment.solver)
    (dest / INDEX).write_text("".join(json.dumps({k: v for k, v in row.items() if k != "paths"}) + "\n"
                                              for row in rows.values()))
    row = rows.get(assignment.parent_env_id)
    if row is None:
        return
    target = dest / assignment.parent_env_id / assignment.solver
    target.mkdir(parents=True)
    for i, rel in enumerate(row.get("paths", [])[:MAX_TRAJECTORIES]):
        file = source / rel
        if file.is_file():
            shutil.copy2(file, target / f"{i}.json")


def trajectory_digest(path: Path, max_chars: int = 3000) -> str:
    """A short text view of one trajectory: commands, last outputs, reward, verifier tail."""
    data = json.loads(path.read_text())
    extra = data.get("extra", {})
    lines = [f"attempt {extra.get('attempt')}: reward {extra.get('reward')}, ended {extra.get('end_reason')}"]
    for step in data.get("steps", []):
        for call in step.get("tool_calls") or []:
            lines.append(f"$ {str(call.get('arguments', {}).get('command', call.get('function_name')))[:200]}")
    verifier = str(extra.get("verifier_stdout") or "")[-800:]
    text = "\n".join(lines) + f"\nverifier output (tail):\n{verifier}"
    return text[:max_chars]
