"""Admission of human-in-the-loop tasks, on top of checks 1-4 (which run in ``full_info``: the
task's own reference, reading every true answer from ``solution/answers.json``).

* every blocker must matter: for each one, the reference is run again with that one answer
  replaced by the registry's ``alternative`` (an answer of the same form, which the reference
  parses); if the tests still pass (reward 1), the tests do not depend on it
  (``hil.blocker_unused``, naming the blocker);
* guessing must not pay: the reference run with every answer replaced by its ``guess`` (default:
  its alternative) must score < ``admission.nop_max_reward`` (``hil.guessable``);
* doing nothing (no_tool, no work) must score < it too: that is check 4's do-nothing run.

Only the tests may decide: a run whose reference stops on the changed answers
(``hil.reference_failed``: it cannot read the alternative, so the tests never saw a different
result) or that yields no reward (``hil.no_reward``: a timeout, the sandbox) is an error of its
own, never taken as "the blocker matters". The runs use the task's image (the answers live in
``solution/``, not in the image).
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.hil.blockers import Blocker, BlockerError, load_blockers, write_answers
from aes.sandbox import Outcome, TrialResult
from aes.tasks import Reason, load_task

GUESS = "guess"
PARALLEL_RUNS = 2
_TAIL = 400


def _run_with(task_dir: Path, answers: dict[str, str], runner, image: str, tmp: Path, name: str) -> TrialResult:
    from aes.sandbox import OracleAgent

    copy = tmp / name
    shutil.copytree(task_dir, copy, symlinks=True)
    write_answers(copy, answers)
    return runner.run(load_task(copy), OracleAgent(), image)


def _tail(text: str) -> str:
    text = (text or "").strip()
    return ("..." + text[-_TAIL:]) if len(text) > _TAIL else text


def run_error(trial: TrialResult, what: str) -> Reason | None:
    """Why a run with changed answers decides nothing (None: the tests scored it)."""
    if trial.reward is None:
        return Reason("hil.no_reward", f"the reference run {what} gave no reward ({trial.outcome.value}: "
                                       f"{trial.detail[:200]}); the check needs the tests' verdict")
    if trial.outcome is Outcome.AGENT_TIMEOUT or trial.agent_exit_code not in (0, None):
        how = "did not finish" if trial.outcome is Outcome.AGENT_TIMEOUT else f"exited {trial.agent_exit_code}"
        return Reason("hil.reference_failed",
                      f"solution/solve.sh {how} in the run {what}, so the tests never saw a different result. "
                      "The reference must read and act on every answer the registry lists (its \"alternative\" "
                      "and \"guess\" too); fix the reference's parsing or the registry's alternative/guess. "
                      f"solve.sh output: {_tail(trial.agent_output)}")
    return None


def hil_reasons(task_dir: Path, runner, image: str, nop_max_reward: float) -> list[Reason]:
    """The HiL checks of a task that passed checks 1-4 (``image``: its built image)."""
    try:
        blockers: list[Blocker] = load_blockers(task_dir)
    except BlockerError as exc:
        return [Reason(exc.code, str(exc))]
    truth = {b.id: b.answer for b in blockers}
    runs = {b.id: {**truth, b.id: b.alternative} for b in blockers}
    runs[GUESS] = {b.id: b.guessed for b in blockers}
    with tempfile.TemporaryDirectory(prefix="aes-hil-") as tmp, ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        futures = {key: pool.submit(_run_with, task_dir, answers, runner, image, Path(tmp),
                                    f"change-{key}" if key != GUESS else GUESS) for key, answers in runs.items()}
        trials = {key: future.result() for key, future in futures.items()}
    reasons = []
    for blocker in blockers:
        trial = trials[blocker.id]
        error = run_error(trial, f"with blocker {blocker.id}'s answer set to its alternative {blocker.alternative!r}")
        if error:
            reasons.append(error)
        elif trial.reward == 1.0:
            reasons.append(Reason("hil.blocker_unused",
                                  f"blocker {blocker.id} ({blocker.topic}): with its answer changed from "
                                  f"{blocker.answer!r} to its alternative {blocker.alternative!r} the reference "
                                  "still scores 1: the tests do not depend on it"))
    trial = trials[GUESS]
    error = run_error(trial, "with every answer set to its guess")
    if error:
        reasons.append(error)
    elif trial.reward >= nop_max_reward:
        reasons.append(Reason("hil.guessable", f"a reference run with every withheld answer guessed (each "
                                               f"blocker's \"guess\", else its alternative) scores {trial.reward:.2f} "
                                               f"(must be < {nop_max_reward:g}): the task does not need the answers"))
    return reasons
