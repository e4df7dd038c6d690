"""Admission checks of the software-engineering domain, run after checks 1-4 and the reset check.

A task is a repository with an issue: its public regression tests (in the repository, run by
``[metadata] public_test_command`` of task.toml), its reference fix ``solution/fix.patch``
(applied by ``solution/solve.sh``) and private tests in ``tests/``. On top of checks 1-4:

* ``swe.no_public_test_command`` / ``swe.no_patch`` / ``swe.solution_not_a_patch``: the task
  does not say how its public tests run, has no ``solution/fix.patch``, or its solve.sh never
  applies it;
* ``swe.public_tests_pass_unpatched``: the public test command exits 0 on the repository as
  built (the issue's regression test must fail before the fix);
* ``swe.public_tests_fail_patched``: after solve.sh (the patch) it does not exit 0;
* ``swe.private_tests_pass_unpatched``: every private test (``tests/test_*.py``, not the copy of
  the public tests in ``tests/public/``; run by pytest without test.sh's gate) passes on the
  repository as built, or the verifier gives it reward 1;
* ``swe.tests_run_agent_code``: the tests would run the agent's code where it can forge the
  reward: ``tests/untrusted.py`` is not a byte copy of the kit (``aes/domains/kit/untrusted.py``),
  test.sh's gate does not run the public tests through it, or a private test imports the package
  itself (``import_module``, ``spec_from_file_location``, ``exec``, ``runpy``, the repository on
  ``sys.path``) instead of calling it through :class:`Untrusted`, or no private test is a
  ``test_gate_*`` (the gate test.sh trusts: the public suite's exit status is the agent code's word);
* ``swe.special_cased_rewarded``: the wrong-work probe (:mod:`aes.domains.swe.probes`): the
  unpatched repository answering the public tests' exact calls from a table (the issue's examples
  special-cased) earns 0.5 or more;
* ``swe.check_failed``: a check trial broke before it could tell (infrastructure, a dead
  container); the message says how.

Two trials on the task's image, side by side, each with a check agent (:class:`PublicTests`):
one runs the public test command on the repository as built, then the private tests by themselves
(pytest on a copy of ``tests/`` outside ``/tests``: test.sh gates its reward on the public tests,
which fail there, so its reward alone cannot tell whether the private tests exercise the bug), and
the verifier scores that untouched repository; the other runs solve.sh, then the public test
command.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.domains.swe.probes import SpecialCased, special_cased_reasons
from aes.sandbox import AgentRun, Container, Outcome, TrialResult
from aes.tasks import Reason, Task, load_task

PATCH = "fix.patch"
KIT = Path(__file__).resolve().parent.parent / "kit" / "untrusted.py"
IN_PROCESS = ("import_module", "spec_from_file_location", "exec(", "runpy", "__import__", "sys.path.insert(0, REPO",
              "sys.path.append(REPO", "/app/repo\")")
"""Text in a private test that imports the code under test into the process deciding the reward."""
COMMAND_KEY = "public_test_command"
PRIVATE_COPY = "/tmp/aes-swe-private-tests"
"""Where the unpatched check trial runs the private tests (removed afterwards)."""
_TAIL = 600


def _tail(text: str) -> str:
    text = (text or "").strip()
    return ("..." + text[-_TAIL:]) if len(text) > _TAIL else text


class PublicTests:
    """A check agent: runs the task's public test command, after the reference fix when ``patched``.

    ``info`` gets ``tests_exit`` (None: it timed out), ``tests_output``; when patched,
    ``solve_exit`` and ``solve_output``, else ``private_exit`` and ``private_output`` (pytest over
    the private tests, as the verifier's user). The agent never fails the trial itself: the
    verifier still runs on whatever the repository holds afterwards.
    """

    def __init__(self, command: str, patched: bool):
        self.command = command
        self.patched = patched
        self.name = "swe-patched" if patched else "swe-unpatched"

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        info: dict = {}
        budget = max(timeout / 2, 1.0)
        if self.patched:
            container.upload_dir(task.solution_dir, "/solution", executable=("solve.sh",))
            env = {"DEBIAN_FRONTEND": "noninteractive", **task.spec.solution_env}
            solve = container.exec(["bash", "-c", "/solution/solve.sh"], budget, env=env, user=task.spec.agent_user)
            info["solve_exit"], info["solve_output"] = solve.exit_code, _tail(solve.output)
            if solve.exit_code != 0:
                return AgentRun(exit_code=solve.exit_code, output=solve.output, info=info)
        tests = container.exec(["bash", "-c", self.command], budget, user=task.spec.agent_user)
        info["tests_exit"], info["tests_output"] = tests.exit_code, _tail(tests.output)
        info["tests_timed_out"] = tests.timed_out
        if not self.patched:
            container.upload_dir(task.tests_dir, PRIVATE_COPY)
            script = f"cd {PRIVATE_COPY} && python3 -m pytest -q -p no:cacheprovider --ignore=public; code=$?; rm -rf {PRIVATE_COPY}; exit $code"
            private = container.exec(["bash", "-c", script], budget, user=task.spec.verifier_user)
            info["private_exit"], info["private_output"] = private.exit_code, _tail(private.output)
        return AgentRun(exit_code=0, output=tests.output, info=info)


def static_reasons(task: Task) -> list[Reason]:
    """What the task lacks to be checked at all (no trial needed)."""
    reasons = []
    command = task.spec.metadata.get(COMMAND_KEY)
    if not isinstance(command, str) or not command.strip():
        reasons.append(Reason("swe.no_public_test_command",
                              f"task.toml has no [metadata] {COMMAND_KEY} (a string): the shell command that runs "
                              "the repository's public tests, e.g. \"cd /app/repo && python3 -m pytest -q tests\""))
    patch = task.solution_dir / PATCH
    if not patch.is_file() or not patch.read_text(encoding="utf-8", errors="replace").strip():
        reasons.append(Reason("swe.no_patch", f"solution/{PATCH} is missing or empty: the reference fix of a "
                                              "software-engineering task is a patch of the repository"))
    else:
        solve = task.solution_dir / "solve.sh"
        text = solve.read_text(encoding="utf-8", errors="replace") if solve.is_file() else ""
        if PATCH not in text:
            reasons.append(Reason("swe.solution_not_a_patch",
                                  f"solution/solve.sh never names {PATCH}: it must apply the patch "
                                  f"(git apply /solution/{PATCH}, or patch -p1 < /solution/{PATCH})"))
    reasons.extend(_agent_code_reasons(task))
    return reasons


def _agent_code_reasons(task: Task) -> list[Reason]:
    """``swe.tests_run_agent_code`` when the tests would run the agent's code in their own process or as root."""
    kit = task.tests_dir / KIT.name
    found = []
    if not kit.is_file() or kit.read_bytes() != KIT.read_bytes():
        found.append(f"tests/{KIT.name} is missing or not a byte copy of aes/domains/kit/{KIT.name}")
    test_sh = task.tests_dir / "test.sh"
    if test_sh.is_file() and f"/tests/{KIT.name}" not in test_sh.read_text(encoding="utf-8", errors="replace"):
        found.append(f"tests/test.sh's gate does not run the public tests through /tests/{KIT.name} (as root, the "
                     "agent's code could rewrite the tests or the reward)")
    tests = sorted(task.tests_dir.glob("test_*.py"))
    if tests and not any("def test_gate_" in p.read_text(encoding="utf-8", errors="replace") for p in tests):
        found.append("no private test is named test_gate_* (the issue's own case, through the kit: test.sh gives no "
                     "reward while it fails, whatever exit status the public suite reports)")
    for path in tests:
        text = path.read_text(encoding="utf-8", errors="replace")
        hits = [marker for marker in IN_PROCESS if marker in text]
        if hits:
            found.append(f"tests/{path.name} imports the code under test itself ({', '.join(hits)})")
    if not found:
        return []
    return [Reason("swe.tests_run_agent_code",
                   "; ".join(found) + ": call the package through Untrusted (tests/untrusted.py), which runs it in a "
                                      "child process as an unprivileged user and returns plain values, as the "
                                      "task format shows")]


def _broken(which: str, trial: TrialResult) -> Reason | None:
    """A reason when the check trial could not tell anything (its agent never ran the tests)."""
    if "tests_exit" in trial.agent_info or "solve_exit" in trial.agent_info:
        return None
    return Reason("swe.check_failed", f"the {which} check trial ended before the public tests ran "
                                      f"({trial.outcome.value}: {trial.detail[:300]})")


def checks(task_dir: Path, runner, image: str) -> list[Reason]:
    """The software-engineering checks of the task in ``task_dir`` (built as ``image``)."""
    task = load_task(task_dir)
    reasons = static_reasons(task)
    if reasons:
        return reasons
    command = task.spec.metadata[COMMAND_KEY]
    repo = re.match(r"\s*cd\s+(\S+)\s*&&", command)
    with ThreadPoolExecutor(max_workers=3) as pool:
        before_f = pool.submit(runner.run, task, PublicTests(command, patched=False), image)
        after_f = pool.submit(runner.run, task, PublicTests(command, patched=True), image)
        special_f = pool.submit(runner.run, task, SpecialCased(repo.group(1) if repo else task.spec.workdir or "/app/repo"),
                                image)
        before, after, special = before_f.result(), after_f.result(), special_f.result()
    for which, trial in (("unpatched", before), ("patched", after)):
        broken = _broken(which, trial)
        if broken:
            reasons.append(broken)
    if reasons:
        return reasons

    info = before.agent_info
    if info.get("tests_exit") == 0:
        reasons.append(Reason("swe.public_tests_pass_unpatched",
                              f"the public tests ({command}) pass on the repository as built: the issue needs a "
                              f"regression test that fails before the fix; output: {info.get('tests_output', '')}"))
    info = after.agent_info
    if info.get("solve_exit") != 0:
        reasons.append(Reason("swe.public_tests_fail_patched",
                              f"solution/solve.sh exited {info.get('solve_exit')} (the patch did not apply?), so the "
                              f"public tests never ran on the fixed repository; output: {info.get('solve_output', '')}"))
    elif info.get("tests_exit") != 0:
        how = "timed out" if info.get("tests_timed_out") else f"exited {info.get('tests_exit')}"
        reasons.append(Reason("swe.public_tests_fail_patched",
                              f"after solution/{PATCH} the public tests ({command}) {how}: they must pass on the "
                              f"fixed repository; output: {info.get('tests_output', '')}"))
    if before.agent_info.get("private_exit") == 0:
        reasons.append(Reason("swe.private_tests_pass_unpatched",
                              "every private test (tests/test_*.py) passes on the unpatched repository: they must "
                              "exercise what the issue asks for and most must fail before the fix; pytest output: "
                              f"{before.agent_info.get('private_output', '')}"))
    elif before.outcome in (Outcome.OK, Outcome.AGENT_TIMEOUT) and before.reward is not None and before.reward >= 1.0:
        reasons.append(Reason("swe.private_tests_pass_unpatched",
                              f"the private tests (tests/) score {before.reward:g} on the unpatched repository: "
                              "they must exercise what the issue asks for and fail before the fix; verifier "
                              f"output: {_tail(before.verifier_output)}"))
    reasons += special_cased_reasons(special)
    return reasons
