"""Admission of human-in-the-loop tasks, on top of checks 1-4 (which run in ``full_info``: the
task's own reference, reading every true answer from ``solution/answers.json``).

* every blocker must matter: for each one, the reference is run again with that one answer
  changed; if the tests still pass (reward 1), the tests do not depend on it
  (``hil.blocker_unused``, naming the blocker);
* guessing must not pay: the reference run with every answer replaced by an obvious default
  must score < ``admission.nop_max_reward`` (``hil.guessable``);
* doing nothing (no_tool, no work) must score < it too: that is check 4's do-nothing run.

The runs use the task's image (the answers live in ``solution/``, not in the image).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from aes.hil.blockers import Blocker, BlockerError, load_blockers, write_answers
from aes.tasks import Reason, load_task

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def changed(answer: str) -> str:
    """Another plausible answer: every number moved (n -> 2n + 1), else the text altered."""
    if _NUMBER.search(answer):
        def move(m: re.Match) -> str:
            value = float(m.group(0)) * 2 + 1
            return str(int(value)) if "." not in m.group(0) else f"{value:.{len(m.group(0).split('.')[1])}f}"
        return _NUMBER.sub(move, answer)
    return f"{answer[::-1]}_changed"


def guessed(answer: str) -> str:
    """What a solver that did not ask might assume: zero for numbers, empty otherwise."""
    return _NUMBER.sub("0", answer) if _NUMBER.search(answer) else ""


def _run_with(task_dir: Path, answers: dict[str, str], runner, image: str, tmp: Path, name: str) -> float | None:
    from aes.sandbox import OracleAgent

    copy = tmp / name
    shutil.copytree(task_dir, copy, symlinks=True)
    write_answers(copy, answers)
    return runner.run(load_task(copy), OracleAgent(), image).reward


def hil_reasons(task_dir: Path, runner, image: str, nop_max_reward: float) -> list[Reason]:
    """The HiL checks of a task that passed checks 1-4 (``image``: its built image)."""
    try:
        blockers: list[Blocker] = load_blockers(task_dir)
    except BlockerError as exc:
        return [Reason(exc.code, str(exc))]
    truth = {b.id: b.answer for b in blockers}
    reasons = []
    with tempfile.TemporaryDirectory(prefix="aes-hil-") as tmp:
        for blocker in blockers:
            reward = _run_with(task_dir, {**truth, blocker.id: changed(blocker.answer)}, runner, image, Path(tmp),
                               f"change-{blocker.id}")
            if reward == 1.0:
                reasons.append(Reason("hil.blocker_unused",
                                      f"blocker {blocker.id} ({blocker.topic}): with its answer changed from "
                                      f"{blocker.answer!r} to {changed(blocker.answer)!r} the reference still scores 1: "
                                      "the tests do not depend on it"))
        guess = {b.id: guessed(b.answer) for b in blockers}
        reward = _run_with(task_dir, guess, runner, image, Path(tmp), "guess")
        if reward is not None and reward >= nop_max_reward:
            reasons.append(Reason("hil.guessable", f"a reference run with every withheld answer guessed "
                                                   f"(numbers 0, text empty) scores {reward:.2f} (must be < "
                                                   f"{nop_max_reward:g}): the task does not need the answers"))
    return reasons
