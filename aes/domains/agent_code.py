"""Do a task's tests run the agent's code in the process that decides the reward? (a static reading)

A test that imports the agent's module, or runs the agent's script with ``subprocess``, runs that
code as root inside the verifier: from there it can read the expected values next to the tests,
rewrite the report or the reward. Tasks whose deliverable is code call it through the kit instead
(``tests/untrusted.py``, a byte copy of ``aes/domains/kit/untrusted.py``: a child process as an
unprivileged user, plain values back). This module reads a task's ``tests/`` as text and names
what would run code in the tests' own process:

* an ``import`` of a module that is neither the standard library, pytest, nor a file of
  ``tests/`` itself (the agent's package, wherever ``sys.path`` points);
* an import of a module that loads or runs code (``importlib``, ``runpy``, ``subprocess``,
  ``multiprocessing``, ``pickle``, ``marshal``, ``shelve``, ``pty``, ``ctypes``, ``code``);
* the built-ins ``exec``, ``eval``, ``compile``, ``__import__``, and attributes that load code or
  start programs (``import_module``, ``spec_from_file_location``, ``run_path``, ``system``,
  ``popen``, ``execv``..., ``spawn``..., ``importorskip``, ``load_extension``);
* ``tests/untrusted.py`` that is not the kit's byte copy, when the tests import it;
* ``tests/test.sh`` naming one of the agent's paths (it would run or source what the agent wrote).

Files under ``tests/public/`` (a repository's own suite, which the kit's gate runs as the
unprivileged user) are not read. Source text handed to the child (a ``helpers=`` string) is a
string, not code of the test.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent / "kit"
TEST_FRAMEWORK = {"pytest", "_pytest"}
LOADERS = {"importlib", "runpy", "subprocess", "multiprocessing", "pickle", "marshal", "shelve", "pty", "ctypes",
           "code", "codeop", "dill", "cloudpickle", "zipimport", "pkgutil"}
"""Modules whose import in a test lets it load or run code that is not its own."""
CALLS = {"exec", "eval", "compile", "__import__"}
ATTRS = {"__import__", "import_module", "spec_from_file_location", "module_from_spec", "exec_module", "run_path",
         "run_module", "load_module", "SourceFileLoader", "system", "popen", "execv", "execve", "execvp", "execvpe",
         "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle",
         "posix_spawn", "posix_spawnp", "startfile", "importorskip", "load_extension", "enable_load_extension"}
"""Attributes (``importlib.import_module``, ``os.system``, ...) that load code or start a program."""


def _local_modules(tests_dir: Path) -> set[str]:
    found = {p.stem for p in tests_dir.glob("*.py")}
    found |= {p.name for p in tests_dir.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return found


def in_process(source: str, local: set[str]) -> list[str]:
    """What in a test's source would load or run code in its own process (``line N: what``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"does not parse ({exc.msg}, line {exc.lineno})"]
    allowed = set(sys.stdlib_module_names) - LOADERS | TEST_FRAMEWORK | local
    found = []
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = ["." if node.level else (node.module or "")]
        for module in modules:
            root = module.split(".")[0]
            if root in LOADERS:
                found.append(f"line {node.lineno}: imports {module} (loads or runs code)")
            elif root not in allowed:
                found.append(f"line {node.lineno}: imports {module} (not the standard library, pytest or a file "
                             "of tests/)")
        if isinstance(node, ast.Name) and node.id in CALLS:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRS:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def tests_run_agent_code(tests_dir: Path, agent_paths: tuple[str, ...] = ("/app",)) -> list[str]:
    """Why the tests in ``tests_dir`` would run the agent's code in their own process (empty: they
    would not). ``agent_paths``: where the agent's files are (``test.sh`` must not name them)."""
    found = []
    local = _local_modules(tests_dir)
    kit = {p.name: p.read_bytes() for p in KIT.glob("*.py")}
    for path in sorted(tests_dir.rglob("*.py")):
        rel = path.relative_to(tests_dir)
        if rel.parts[0] == "public":
            continue
        if len(rel.parts) == 1 and rel.name in kit:
            if path.read_bytes() != kit[rel.name]:
                found.append(f"tests/{rel} is not a byte copy of aes/domains/kit/{rel.name}")
            continue
        hits = in_process(path.read_text(encoding="utf-8", errors="replace"), local)
        if hits:
            found.append(f"tests/{rel}: {'; '.join(hits[:5])}")
    test_sh = tests_dir / "test.sh"
    if test_sh.is_file():
        for number, line in enumerate(test_sh.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0]
            named = [p for p in agent_paths if p and p in code]
            if named and "/tests/untrusted.py" not in code:
                found.append(f"tests/test.sh line {number} names {named[0]} (the agent's files): run them only "
                             "through /tests/untrusted.py")
    return found
