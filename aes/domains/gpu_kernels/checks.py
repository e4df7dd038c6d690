"""Admission checks of the GPU-kernel domain, run after checks 1-4 and the reset check.

The gate and the launch/eager-op tests live in each task's own tests; what is checked here is that
those tests keep the agent's code out of the process that decides the reward:

* ``gpu_kernels.tests_import_solution``: ``tests/untrusted.py`` is not a byte copy of the kit
  (``aes/domains/kit/untrusted.py``), no test calls ModelNew through :class:`Untrusted`, or a
  test file (``tests/**/*.py`` but the kit's copy and ``tests/public/``) imports or runs the
  solution in its own process: an ``import`` of ``solution``, ``importlib``, ``runpy``, the
  built-ins ``exec``/``eval``/``compile``/``__import__``, or ``spec_from_file_location``/
  ``import_module``/``exec_module``/``run_path`` and the like. Source text handed to the child (a ``helpers=`` string) is a
  string, not code of the test, and is not looked into; ``tests/test.sh`` must not run
  ``solution.py`` either.

* ``gpu_kernels.eager_rewarded``: the wrong-work probe. The reference's own eager code, renamed
  ``ModelNew`` (``/app/reference.py`` with ``class Model(`` made ``class ModelNew(``, written to
  ``/app/solution.py`` as the agent would), is what a policy writes when it does the math without a
  kernel; the verifier scores it, and a task whose tests give it 0.5 or more pays for correctness
  that needs no kernel. The probe cannot tell (no reason) when the image has no ``/app/reference.py``
  defining ``class Model(``.

The static check needs no trial; the probe runs one trial on the task's image (``runner``,
``image``; without them only the static check runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

from aes.sandbox import AgentRun
from aes.tasks import Reason, load_task

KIT = Path(__file__).resolve().parent.parent / "kit" / "untrusted.py"
CODE = "gpu_kernels.tests_import_solution"
EAGER_MAX = 0.5
"""Eager code alone earning this much or more is rejected."""
CANNOT_TELL = 3
EAGER = (f'grep -q "^class Model(" /app/reference.py 2>/dev/null || exit {CANNOT_TELL}; '
         'sed "s/^class Model(/class ModelNew(/" /app/reference.py > /app/solution.py')
IMPORTS = {"solution", "importlib", "runpy"}
"""Modules whose import in a test means the solution can run in the tests' process."""
CALLS = {"exec", "eval", "compile", "__import__"}
"""Built-ins whose use in a test runs code in the tests' process."""
ATTRS = {"__import__", "spec_from_file_location", "import_module", "exec_module", "run_path", "run_module",
         "load_module", "SourceFileLoader"}
"""Attributes (``importlib.util.spec_from_file_location``, ...) that load code into the tests' process."""


def _in_process(source: str) -> list[str]:
    """What in a test's source imports or runs code in its own process (line: what)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"does not parse ({exc.msg}, line {exc.lineno})"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in IMPORTS:
                found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Name) and node.id in CALLS:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRS:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def tests_import_solution(tests_dir: Path) -> list[str]:
    """Why the tests in ``tests_dir`` would run the agent's code where it can forge the reward (empty: they do not)."""
    found = []
    kit = tests_dir / KIT.name
    if not kit.is_file() or kit.read_bytes() != KIT.read_bytes():
        found.append(f"tests/{KIT.name} is missing or not a byte copy of aes/domains/kit/{KIT.name}")
    uses_kit = False
    for path in sorted(tests_dir.rglob("*.py")):
        rel = path.relative_to(tests_dir)
        if rel == Path(KIT.name) or rel.parts[0] == "public":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        uses_kit = uses_kit or ("Untrusted(" in text and path.name.startswith("test_"))
        hits = _in_process(text)
        if hits:
            found.append(f"tests/{rel} imports or runs code in the tests' process ({'; '.join(hits[:5])})")
    if not uses_kit:
        found.append("no tests/test_*.py calls ModelNew through Untrusted (tests/untrusted.py)")
    test_sh = tests_dir / "test.sh"
    if test_sh.is_file():
        text = test_sh.read_text(encoding="utf-8", errors="replace")
        if "solution" in text:
            found.append("tests/test.sh names the solution: it must leave /app/solution.py to the tests' child process")
    return found


class EagerOnly:
    """A check agent: the reference's eager code as the solution (:data:`EAGER`, as the agent's user).
    ``info``: ``probe_exit`` (:data:`CANNOT_TELL`: no reference to copy)."""

    name = "gpu-kernels-eager-only"

    def run(self, task, container, timeout: float) -> AgentRun:
        run = container.exec(["sh", "-c", EAGER], min(timeout, 60.0), user=task.spec.agent_user)
        return AgentRun(exit_code=0, output=run.output, info={"probe_exit": run.exit_code})


def eager_reasons(trial) -> list[Reason]:
    """``gpu_kernels.eager_rewarded`` when eager code alone earned :data:`EAGER_MAX` or more."""
    if trial.agent_info.get("probe_exit") != 0 or trial.reward is None:
        return []
    if trial.reward >= EAGER_MAX:
        return [Reason("gpu_kernels.eager_rewarded",
                       f"its tests pay for eager math without a kernel: the reference's own eager code as ModelNew "
                       f"earns {trial.reward:.2f} (at least {EAGER_MAX}); correctness must gate the reward and the "
                       "kernel must carry most of it (the seeds' WEIGHTS: correct 0.4, triton 0.6 - launched, no "
                       "eager math, and its launches alone compute the output)")]
    return []


def checks(task_dir: str | Path, runner=None, image: str | None = None) -> list[Reason]:
    """The GPU-kernel checks of the task in ``task_dir``: the static reading, then (with ``runner``
    and ``image``) the eager-only probe."""
    task = load_task(Path(task_dir))
    found = tests_import_solution(task.tests_dir)
    if found:
        return [Reason(CODE, "; ".join(found) + ": the tests must never import /app/solution.py: build and run "
                                                "ModelNew in the child of tests/untrusted.py (a helper module passed as "
                                                "source text with helpers=), send it the reference's state_dict and the "
                                                "inputs, compare the tensors it returns, and read solution.py only as "
                                                "text, as the seeds' tests/test_outputs.py does")]
    if runner is None or image is None:
        return []
    return eager_reasons(runner.run(task, EagerOnly(), image))
