"""A generation's proposer episodes, each one's result kept in the pool as soon as it ends.

The flywheel runs its assignments here (``harness.episodes_at_once`` at a time) instead of in
one batch: every episode's :class:`~aes.proposer.episode.EpisodeResult` is stored with its
assignment (:meth:`aes.pool.AssignmentLog.record_result`) the moment it ends, so a run resumed
after Ctrl-C, a kill or a crash counts every episode of the interrupted round — its valid-env
rate, tokens and cost per valid env — not only those it ran itself. Once a stop is requested
no further episode starts.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from aes.pool import AssignmentLog, PoolStore
from aes.proposer.assignments import Assignment
from aes.proposer.episode import EpisodeResult
from aes.proposer.generate import run_assignments
from aes.report.progress import Progress

log = logging.getLogger("aes")


def run_episodes(stack, assignments: list[Assignment], label: str) -> list[EpisodeResult]:
    """One episode per (opened) assignment; each result stored as it ends; a progress line with the
    time left after each."""
    record = AssignmentLog(stack.pool)
    progress = Progress(len(assignments))

    def episode(assignment: Assignment) -> EpisodeResult:
        [result] = run_assignments(stack, [assignment], opened=True)
        record.record_result(assignment.assignment_id, to_record(result))
        return result

    results: list[EpisodeResult] = []
    pool = ThreadPoolExecutor(max_workers=max(1, stack.cfg.harness.episodes_at_once),
                              thread_name_prefix="aes-episode")
    try:
        pending = {pool.submit(episode, a) for a in assignments}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                results.append(future.result())
                log.info("%s: proposer episodes %s", label, progress.step())
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # the ones running end at their next model call
        raise
    pool.shutdown()
    return results


def to_record(result: EpisodeResult) -> dict:
    return dataclasses.asdict(result)


def from_record(data: dict) -> EpisodeResult:
    """The stored result (fields this aes does not know are left out)."""
    known = {f.name for f in dataclasses.fields(EpisodeResult)}
    spec = {f.name for f in dataclasses.fields(Assignment)}
    values = {k: v for k, v in data.items() if k in known}
    values["assignment"] = Assignment(**{k: v for k, v in (data.get("assignment") or {}).items() if k in spec})
    return EpisodeResult(**values)


def round_results(pool: PoolStore, round_: int) -> list[EpisodeResult]:
    """Every finished episode of the generation ``round_``, whichever session ran it."""
    out = []
    for row in AssignmentLog(pool).rows(round_):
        if row["status"] != "closed":
            continue
        out.append(from_record(row["result"]) if row.get("result") else _from_row(pool, row))
    return out


def _from_row(pool: PoolStore, row: dict) -> EpisodeResult:
    """A closed assignment whose result was not stored (the process died between the two writes,
    or an older aes ran it): what its row and the pool's verdicts say."""
    spec = {f.name for f in dataclasses.fields(Assignment)}
    assignment = Assignment(**{k: v for k, v in row["spec"].items() if k in spec})
    assignment.assignment_id = row["assignment_id"]
    env_id, outcome = row.get("result_env_id"), row.get("outcome") or "broken"
    checks = [v for v in pool.verdicts(env_id) if v["stage"] == "checks_1_4"] if env_id else []
    return EpisodeResult(assignment=assignment, outcome=outcome, env_id=env_id, tokens=int(row.get("tokens") or 0),
                         cost_usd=float(row.get("cost_usd") or 0.0), checks_1_4=bool(checks and checks[-1]["passed"]),
                         checks_1_6=outcome in ("valid", "admitted"), calibrated=outcome == "admitted")
