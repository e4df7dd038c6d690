"""The software-engineering domain's wrong-work probe: the issue's examples special-cased
(``swe.special_cased_rewarded``).

The cheapest wrong fix of an issue returns the expected values for the exact calls the repository's
tests show and leaves the bug in place. The probe derives that attempt from the task itself: in the
unpatched repository, it reads the public tests (as committed in the image) for every ``assert
f(args) == expected``, ``assert f(args)`` and ``assert not f(args)`` whose arguments and expected
value it can evaluate (literals and the test module's constants), and rebinds each such function in
the package's ``__init__.py`` so that it answers those exact calls from that table and everything
else as before. The verifier scores the result as it scores an agent's work; a task whose tests give
it 0.5 or more pays for the examples, not the fix, and is rejected.

It cannot tell (and gives no reason) when the public tests hold no such assertion about a function
the package exports, or the script could not run (no python3 in the image).
"""

from __future__ import annotations

from aes.sandbox import AgentRun
from aes.tasks import Reason

SPECIAL_CASED_MAX = 0.5
CANNOT_TELL = 3

SCRIPT = r'''
import ast, os, sys
repo, tests = sys.argv[1], sys.argv[2]
table = {}          # (module, name) -> {repr(args): repr(expected)}


def evaluate(node, names, path):
    return eval(compile(ast.Expression(node), path, "eval"), {"__builtins__": {}}, dict(names))


for root, _, files in os.walk(os.path.join(repo, tests)):
    for file in sorted(files):
        if not file.endswith(".py"):
            continue
        path = os.path.join(root, file)
        try:
            tree = ast.parse(open(path).read())
        except (OSError, SyntaxError):
            continue
        names, origin = {}, {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    origin[alias.asname or alias.name] = (node.module.split(".")[0], alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    origin[alias.asname or alias.name] = (alias.name.split(".")[0], None)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    names[node.targets[0].id] = evaluate(node.value, names, path)
                except Exception:
                    pass
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            claims = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
            for claim in claims:
                want, call = True, claim
                if isinstance(claim, ast.UnaryOp) and isinstance(claim.op, ast.Not):
                    want, call = False, claim.operand
                elif isinstance(claim, ast.Compare) and len(claim.ops) == 1 and isinstance(claim.ops[0], ast.Eq):
                    call = claim.left
                    try:
                        want = evaluate(claim.comparators[0], names, path)
                    except Exception:
                        continue
                if not isinstance(call, ast.Call) or call.keywords:
                    continue
                func = call.func
                if isinstance(func, ast.Name) and func.id in origin and origin[func.id][1]:
                    key = (origin[func.id][0], origin[func.id][1])
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in origin \
                        and origin[func.value.id][1] is None:
                    key = (origin[func.value.id][0], func.attr)
                else:
                    continue
                try:
                    args = tuple(evaluate(a, names, path) for a in call.args)
                    table.setdefault(key, {})[repr(args)] = repr(want)
                except Exception:
                    continue

patched = 0
for module in sorted({m for m, _ in table}):
    init = os.path.join(repo, module, "__init__.py")
    if not os.path.isfile(init):
        continue
    lines = ["", "# the issue's examples, special-cased (aes's wrong-work probe)", "import ast as _aes_ast",
             "def _aes_special(fn, answers):",
             "    def call(*args, **kwargs):",
             "        key = repr(args)",
             "        return _aes_ast.literal_eval(answers[key]) if key in answers and not kwargs else fn(*args, **kwargs)",
             "    return call"]
    for (mod, name), answers in sorted(table.items()):
        if mod == module:
            lines.append(f"if callable(globals().get({name!r})): {name} = _aes_special({name}, {answers!r})")
            patched += len(answers)
    with open(init, "a") as f:
        f.write("\n".join(lines) + "\n")
print(f"special-cased {patched} calls of {sum(len(v) for v in table.values())} found")
sys.exit(0 if patched else 3)
'''


class SpecialCased:
    """A check agent: the issue's examples special-cased in the unpatched repository
    (:data:`SCRIPT`, as the agent's user). ``info``: ``probe_exit`` (:data:`CANNOT_TELL`: nothing to
    special-case), ``probe_output``."""

    name = "swe-special-cased"

    def __init__(self, repo: str = "/app/repo", tests: str = "tests"):
        self.repo, self.tests = repo, tests

    def run(self, task, container, timeout: float) -> AgentRun:
        run = container.exec(["sh", "-c", f'command -v python3 >/dev/null || exit {CANNOT_TELL}; '
                                          'exec python3 -c "$0" "$@"', SCRIPT, self.repo, self.tests],
                             min(timeout, 120.0), user=task.spec.agent_user)
        info = {"probe_exit": run.exit_code, "probe_output": (run.output or "")[-600:]}
        return AgentRun(exit_code=0, output=run.output, timed_out=run.timed_out, info=info)


def special_cased_reasons(trial) -> list[Reason]:
    info = trial.agent_info
    if "probe_exit" not in info:
        return [Reason("swe.check_failed", f"the special-cased check trial ended before its probe ran "
                                           f"({trial.outcome.value}: {trial.detail[:300]})")]
    if info["probe_exit"] != 0 or trial.reward is None:
        return []  # nothing to special-case: cannot tell
    if trial.reward >= SPECIAL_CASED_MAX:
        return [Reason("swe.special_cased_rewarded",
                       f"its tests pay for special-casing the issue's examples: the unpatched repository answering "
                       f"the public tests' exact calls from a table ({info['probe_output'].strip()}) earns "
                       f"{trial.reward:.2f} (at least {SPECIAL_CASED_MAX}); the private test_gate_* must check the "
                       "issue's rule on cases the public tests do not show")]
    return []
