"""Admission checks of the human-in-the-loop domain, on top of checks 1-4 and the HiL checks
(:mod:`aes.hil.admission`: every blocker matters, guessing does not pay):

* ``hil.tests_run_agent_code``: the tests would run the agent's code in their own process, as
  root (an import of the agent's module, ``subprocess`` on its script, ``exec``, a test.sh that
  names its files, a changed kit: :func:`aes.domains.agent_code.tests_run_agent_code`). A task
  whose deliverable is code (a module, a class, a script) calls it through ``tests/untrusted.py``,
  a byte copy of the kit: ``Untrusted`` for functions and classes, ``run_as_untrusted`` for a
  script, as the seeds late-fee-policy, rate-limiter and config-migration do. A task whose
  deliverable is data (a CSV, a SQL query run by ``sqlite3``, JSON files) reads it as data.

Static: no trial is needed (the runner and image are not used).
"""

from __future__ import annotations

from pathlib import Path

from aes.domains.agent_code import tests_run_agent_code
from aes.tasks import Reason, load_task

CODE = "hil.tests_run_agent_code"


def checks(task_dir: str | Path, runner=None, image: str | None = None) -> list[Reason]:
    """The HiL domain's own checks of the task in ``task_dir`` (static; ``runner``, ``image`` unused)."""
    task = load_task(Path(task_dir))
    workdir = task.spec.workdir if task.spec.workdir not in (None, "", "/") else None
    found = tests_run_agent_code(task.tests_dir, tuple(p for p in ("/app", workdir) if p))
    if not found:
        return []
    return [Reason(CODE, "; ".join(found) + ": the tests must never import or run the agent's code in their own "
                                            "process (as root it can read the expected values beside the tests and "
                                            "rewrite the reward): call functions and classes through Untrusted and "
                                            "scripts through run_as_untrusted of tests/untrusted.py (a byte copy of "
                                            "instructions/kit/untrusted.py), as the task format shows")]
