"""The sealed verifier: ``tests/test.sh`` runs with the task's own tools, out of the agent's reach.

Guarantee. When the agent phase ends, the agent's container is frozen (no process of the agent
runs again) and its file changes are read out. ``tests/test.sh`` then runs in a *fresh*
container started from the task's pristine image — its own interpreters, libraries, uv, pytest,
compilers, exactly as the task built them — into which aes has written:

  * the agent's file changes that :mod:`aes.sandbox.seal` lets through (data, never the
    verifier's runtime, tool configuration or the reward channel), links carried as copies, a
    git repository's configuration and ``/etc/passwd`` rebuilt as data (:mod:`aes.sandbox.carry`);
  * ``/tests`` from the task, and empty ``/logs/verifier``, ``/logs/agent``, ``/logs/artifacts``.

That container starts with an explicit entrypoint (an absolute ``sleep``: the image's
ENTRYPOINT and CMD never run), no healthcheck, the image's environment with loader and
interpreter start-up hooks cleared (``LD_*``, but for their entries inside ``/usr`` and ``/lib``;
``BASH_ENV``, ``BASH_FUNC_*``, ``PYTHONSTARTUP``, ``NODE_OPTIONS``, ... see :data:`CLEARED_ENV`),
``PATH`` without relative or empty entries (:func:`absolute_path`), ``PYTHONPATH`` kept (images
set it so that the tests import the agent's module; what it could shadow, the standard library,
the image's packages and every module the image's ``python3`` looks for while it starts, is not
carried), and ``test.sh`` runs from ``/tests`` (a directory the agent never wrote), as the task's verifier user
(else the image's ``USER``) given by number, with ``HOME`` set to that user's home in the
pristine image, so a changed ``/etc/passwd`` can neither stop it nor move the home where tools
read their settings. The reward is read from that container's ``/logs/verifier``. So nothing
the agent did can replace a tool the tests run, plant code an interpreter loads at start,
pre-write or redirect the reward, or run at verification time — except what the tests
themselves choose to execute or import from the agent's files (a module the task asked for),
which runs as part of the tests.

While the tests run, the tamper audit (:mod:`aes.sandbox.audit`) watches the carried files from
the engine's host; :meth:`SealedVerifier.tampering` compares what it saw with the reference
solution's own verification.

Not covered: tests that need a process the agent started (a server still listening) — set
``sandbox.trusted_verifier=false`` for Harbor's in-place verification; packages the agent
installed (site-packages, node_modules, ``/usr``) are not visible to the tests.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import threading
from dataclasses import dataclass, field

import docker.errors

from aes.errors import InfrastructureError
from aes.sandbox import accounts, limits
from aes.sandbox.audit import AuditRecord, Classifier, Watch, judge
from aes.sandbox.carry import Carry, SafeTree, apply_carry, carry_from_host, host_layer
from aes.sandbox.carry_api import carry_from_api
from aes.sandbox.container import Container
from aes.sandbox.seal import (
    INTERPRETER_MARKERS,
    SYSTEM_ROOTS,
    SealPolicy,
    installed_by_tests,
    path_dirs,
    shadow_names,
    prefix_candidates,
    tools_in,
)

log = logging.getLogger(__name__)

CLEARED_ENV = (
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND", "PS4", "CDPATH", "GLOBIGNORE",
    "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT", "PYTHONBREAKPOINT",
    "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR", "PYTHONWARNINGS", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
    "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES",
    "RESOLV_HOST_CONF", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "PIP_FIND_LINKS",
    "PIP_CONFIG_FILE", "UV_CONFIG_FILE", "UV_FIND_LINKS", "NPM_CONFIG_USERCONFIG", "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM", "GIT_EXEC_PATH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER",
    "PYTHONPYCACHEPREFIX", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "LESSOPEN", "LESSCLOSE", "OPENSSL_CONF",
    "OPENSSL_ENGINES", "TCLLIBPATH", "R_PROFILE", "R_PROFILE_USER", "R_ENVIRON", "R_ENVIRON_USER", "PHPRC",
    "PHP_INI_SCAN_DIR", "ZDOTDIR", "DOTNET_STARTUP_HOOKS", "GIT_TEMPLATE_DIR", "EDITOR", "VISUAL",
)
"""Variables of the image's environment set empty in the verifier: each makes a loader, shell or
interpreter load or run code from a path (which could hold the agent's files). ``PYTHONPATH`` is
not among them: ``ENV PYTHONPATH=/app`` is how real images let the tests import the agent's
module, as Harbor runs them; a module there that would shadow the standard library, the
image's packages or what the tests install, and package metadata (entry points), are not
carried (:mod:`aes.sandbox.seal`)."""
_CLEARED_PREFIXES = ("LD_", "BASH_FUNC_", "LUA_")
"""Prefixes of cleared variables: the loader's, bash's exported functions (``BASH_FUNC_python3%%``
defines a shell function ``python3`` in every bash), Lua's start-up code and paths."""
HARDENED_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    # git run on a repository the agent wrote must not run its hooks, monitor or pager
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat",
}
KEEPALIVES = (["/bin/sleep"], ["/usr/bin/sleep"], ["/bin/busybox", "sleep"])
LOG_DIRS = ("logs", "logs/verifier", "logs/agent", "logs/artifacts")
TESTS_CWD = "/tests"
_MODULES_SCRIPT = ("import pkgutil, sys\n"
                   "for m in pkgutil.iter_modules(): print(m.name, getattr(m.module_finder, 'path', '') or '-')\n"
                   "for n in sys.builtin_module_names: print(n, '-')\n")
"""Each importable top-level module of the image's python3 and the directory it is found in."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STARTUP_PROBE = "import sys\nfor p in sys.path: print('AES-PATH', p)\n"
"""Run with ``python3 -vv``: every module the interpreter looks for while it starts (``# trying``
lines: ``sitecustomize``, ``usercustomize``, what the image's ``.pth`` lines and sitecustomize
import when present), and its import path.

``PYTHONNOUSERSITE`` is not set: the user's site directory lies in the pristine home, whose tool
directories are never carried, and a test script that installs with ``pip install --user`` (what
pip does for a non-root user) needs it; ``usercustomize`` is reserved like every name above."""


class VerifierError(InfrastructureError):
    """The verifier's container could not be started (or the reference's verification could not be
    audited for want of the infrastructure): not a reward."""


INFRASTRUCTURE_OUTCOMES = ("sandbox_error", "infra_error")
"""Trial outcomes of an infrastructure failure (:data:`aes.sandbox.trial.INFRASTRUCTURE`, by value:
that module imports this one)."""


@dataclass
class ImageFacts:
    """What the verifier needs to know of a task image (read once per image)."""

    env: dict[str, str]
    user: str
    workdir: str
    modules: dict[str, str] | None = None
    """Top-level modules the image's ``python3`` can import -> the directory each is in ("-": built
    in); None: not known yet."""
    homes: dict[int, str] | None = None
    """uid -> home directory, from the pristine image's ``/etc/passwd`` (None: not read yet)."""
    passwd: str = ""
    """The pristine image's ``/etc/passwd``."""
    prefixes: dict[str, bool] | None = None
    """Candidate install prefix -> whether the pristine image has an interpreter there."""
    python: dict[str, "PythonStart"] = field(default_factory=dict)
    """Verifier user -> how the image's python3 starts for it."""


@dataclass(frozen=True)
class PythonStart:
    """How the pristine image's ``python3`` starts for the verifier's user."""

    modules: frozenset[str] = frozenset()
    """Top-level modules it looks for while it starts, found or not: a carried module of such a name
    would run at the start of every Python process (not carried; a touch ends the attempt)."""


RUNTIME_PATH_LISTS = {"LD_LIBRARY_PATH": ":", "LD_PRELOAD": ": "}
"""Loader variables whose entries inside the image's runtime (``/usr``, ``/lib``) are kept: CUDA
images set ``LD_LIBRARY_PATH=/usr/local/nvidia/lib64``, others preload ``/usr/lib/.../libjemalloc.so``;
the agent's changes never reach those directories. Entries anywhere else are dropped."""


def cleared_env(image_env: dict[str, str]) -> dict[str, str]:
    """The image's variables that the verifier's container sets empty (or, for the loader's path
    lists, to their entries inside the runtime; for ``PATH``, to its absolute entries)."""
    out = {}
    for key, value in image_env.items():
        if key == "PATH":
            if absolute_path(value) != value:
                out[key] = absolute_path(value)
        elif key in RUNTIME_PATH_LISTS:
            kept = [e for e in re.split(f"[{RUNTIME_PATH_LISTS[key]}]", value) if _in_runtime(e)]
            if kept != [e for e in re.split(f"[{RUNTIME_PATH_LISTS[key]}]", value) if e]:
                out[key] = RUNTIME_PATH_LISTS[key][0].join(kept)
        elif key in CLEARED_ENV or key.startswith(_CLEARED_PREFIXES):
            out[key] = ""
    return out


def absolute_path(value: str) -> str:
    """``PATH`` without its relative and empty entries: the shell resolves those from the directory a
    command runs in (``cd /app && pytest`` would run ``/app/bin/pytest`` for ``bin``, ``/app/pytest``
    for ``.`` or an empty entry), which the agent writes; the verifier's commands are found in
    absolute directories only."""
    return ":".join(entry for entry in value.split(":") if entry.startswith("/"))


def _in_runtime(entry: str) -> bool:
    path = posixpath.normpath(entry) if entry.startswith("/") else ""
    return bool(path) and ".." not in entry and any(path == r or path.startswith(r + "/") for r in SYSTEM_ROOTS)


class SealedVerifier:
    """Prepares pristine verifier containers and verifies an agent's work in them."""

    def __init__(self, sandbox, cfg=None):
        self.sandbox = sandbox
        self.cfg = cfg or sandbox.cfg
        self._facts: dict[str, ImageFacts] = {}
        self._users: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._references: dict[tuple[str, str], AuditRecord] = {}
        """(image, task digest) -> the audit record of the reference solution's verification."""
        self._reference_locks: dict[tuple[str, str], threading.Lock] = {}

    # -- the image ---------------------------------------------------------------------------
    def facts(self, image: str) -> ImageFacts:
        with self._lock:
            if image in self._facts:
                return self._facts[image]
        config = self.sandbox.client.api.inspect_image(image).get("Config") or {}
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        facts = ImageFacts(env=env, user=str(config.get("User") or ""), workdir=str(config.get("WorkingDir") or ""))
        with self._lock:
            return self._facts.setdefault(image, facts)

    def _modules(self, image: str, container: Container) -> dict[str, str]:
        """Importable top-level modules of the pristine image's python3 and where (once per image)."""
        facts = self.facts(image)
        if facts.modules is None:
            # without the image's PYTHONPATH: modules there (the workdir's) are the agent's to change
            run = container.exec(["python3", "-c", _MODULES_SCRIPT], 60, user="0", workdir="/",
                                 env={"PYTHONPATH": "", "PYTHONSAFEPATH": "1"})
            found: dict[str, str] = {}
            for line in run.output.splitlines() if run.exit_code == 0 else ():
                name, _, where = line.partition(" ")
                if _NAME.match(name):
                    found.setdefault(name, where.strip() or "-")
            facts.modules = found
        return facts.modules

    def python_start(self, image: str, container: Container, user: str, home: str) -> PythonStart:
        """How the pristine image's python3 starts for ``user`` (once per image and user)."""
        facts = self.facts(image)
        if user not in facts.python:
            run = container.exec(["python3", "-vv", "-c", _STARTUP_PROBE], 60, user=user, workdir="/",
                                 env={"HOME": home})
            facts.python[user] = startup_facts(run.output) if run.exit_code == 0 else PythonStart()
        return facts.python[user]

    def _homes(self, image: str, container: Container) -> dict[int, str]:
        """uid -> home directory of the pristine image's accounts (once per image)."""
        facts = self.facts(image)
        if facts.homes is None:
            homes: dict[int, str] = {}
            raw = container.read_file("/etc/passwd") or b""
            facts.passwd = raw.decode("utf-8", "replace")
            for line in facts.passwd.splitlines():
                fields = line.split(":")
                if len(fields) >= 7 and fields[2].isdigit() and fields[5].startswith("/"):
                    homes.setdefault(int(fields[2]), fields[5])
            facts.homes = homes
        return facts.homes

    def _prefixes(self, image: str, container: Container, candidates: tuple[str, ...]) -> tuple[str, ...]:
        """The candidates where the pristine image has an interpreter environment."""
        facts = self.facts(image)
        with self._lock:
            known = facts.prefixes if facts.prefixes is not None else {}
            facts.prefixes = known
        for prefix in candidates:
            if prefix not in known:
                known[prefix] = any(container.stat(f"{prefix}/{m}") is not None for m in INTERPRETER_MARKERS)
        return tuple(p for p in candidates if known[p])

    def home_of(self, image: str, pristine: Container, user: str) -> str:
        """``HOME`` for the verifier user ``uid:gid`` (Docker's ``/`` for a uid with no account)."""
        uid = user.split(":")[0]
        return self._homes(image, pristine).get(int(uid), "/") if uid.isdigit() else "/"

    def _numeric_user(self, image: str, container: Container, user: str) -> str:
        """``user`` as ``uid:gid`` from the pristine image (a changed /etc/passwd cannot matter)."""
        if not user or user in ("root", "0", "0:0"):
            return "0:0" if not user or user == "root" else user
        if re.fullmatch(r"\d+(:\d+)?", user):
            return user
        key = (image, user)
        if key not in self._users:
            name = user.split(":")[0]
            run = container.exec(["sh", "-c", 'printf "%s:%s" "$(id -u "$1")" "$(id -g "$1")"', "sh", name], 30,
                                 user="0", workdir="/")
            value = run.output.strip()
            self._users[key] = value if run.exit_code == 0 and re.fullmatch(r"\d+:\d+", value) else user
        return self._users[key]

    # -- the container -----------------------------------------------------------------------
    def start(self, image: str, task) -> Container:
        """A pristine container of ``image``, idle until :meth:`verify` (start it early)."""
        facts = self.facts(image)
        env = {**facts.env, **cleared_env(facts.env), **task.spec.env}
        if env.get("PATH"):
            env["PATH"] = absolute_path(env["PATH"])
        last: Exception | None = None
        for keepalive in KEEPALIVES:
            try:
                return self.sandbox.start(image, task, role="verifier", entrypoint=keepalive, env=env, workdir="/")
            except Exception as exc:  # noqa: BLE001 - try the next keep-alive, then report
                last = exc
                if "no such file" not in str(exc).lower() and "not found" not in str(exc).lower():
                    raise
        raise VerifierError(f"no keep-alive program (/bin/sleep, /usr/bin/sleep, busybox) in {image}: {last}")

    # -- verification ------------------------------------------------------------------------
    def collect(self, agent: Container, image: str, task, pristine: Container, user: str = "0:0") -> Carry:
        """Freeze the agent's container and read the changes to carry (raises CarryError); ``user``:
        the verifier's ``uid:gid``, owner of what the agent left in scratch space."""
        facts = self.facts(image)
        workdir = task.spec.workdir or facts.workdir
        homes = tuple(self._homes(image, pristine).values())
        scripts = _test_scripts(task)
        tools = tuple(dict.fromkeys(t for text in scripts for t in tools_in(text)))
        installed = frozenset().union(*(installed_by_tests(text) for text in scripts), _requirements(task))
        candidates = prefix_candidates(path_dirs(facts.env), tools, workdir, homes)
        prefixes = self._prefixes(image, pristine, candidates)
        modules = self._modules(image, pristine)
        starting = self.python_start(image, pristine, user, self.home_of(image, pristine, user)).modules
        limit = limits.storage_mb(self.cfg, task) << 20
        ids = user.split(":")
        owner = (int(ids[0]), int(ids[1])) if len(ids) == 2 and all(i.isdigit() for i in ids) else None
        frozen = agent.pause()
        layer = host_layer(agent) if frozen else None  # a stopped container's merged view is unmounted
        # the agent's account database names homes too: their tool directories are not carried
        moved = accounts.homes(_agent_passwd(agent, layer))
        policy = SealPolicy(facts.env, workdir=workdir, homes=(*homes, *moved), prefixes=prefixes)
        # A module name is reserved where the image's module lies out of the agent's reach (the
        # standard library, site-packages): a same-named file elsewhere would shadow it. A module
        # of an editable install in the workdir is the agent's to change, not to be shadowed. The
        # modules python3 looks for while it starts are reserved too, found or not.
        reserved = {name for name, where in modules.items() if where == "-" or policy.deny_reason(where, is_dir=True)}
        policy.shadow = shadow_names(frozenset(reserved) | installed | starting)
        shells: dict[str, bool] = {}

        def safe_shell(shell: str) -> bool:
            if shell not in shells:
                shells[shell] = policy.deny_reason(shell, is_dir=False) is not None and pristine.stat(shell) is not None
            return shells[shell]

        def passwd(data: bytes) -> bytes:
            text, notes = accounts.merge_passwd(facts.passwd, data.decode("utf-8", "replace"), safe_shell)
            for note in notes:
                log.info("%s: %s", task.name, note)
            return text.encode()

        def existed(path: str) -> dict | None:
            return pristine.stat(path)

        transforms = {accounts.PASSWD: passwd} if facts.passwd else {}
        if layer is not None:
            upper, merged, engine_files = layer
            carry = carry_from_host(upper, merged, policy, existed, self.cfg.max_carry_entries, limit,
                                    engine_files=engine_files, scratch_owner=owner, transforms=transforms,
                                    max_seconds=self.cfg.max_carry_sec)
        else:
            carry = carry_from_api(agent, policy, existed, self.cfg.max_carry_entries, limit, scratch_owner=owner,
                                   transforms=transforms, max_seconds=self.cfg.max_carry_sec)
        carry.shadow = policy.shadow
        return carry

    def prepare(self, pristine: Container, task, carry: Carry) -> str | None:
        """Write the carried changes, then fresh log dirs and the tests; an error message or None."""
        problem = apply_carry(pristine, carry)
        if problem:
            return problem
        pristine.upload_dir(task.tests_dir, "/tests", executable=("test.sh",), extra_dirs=LOG_DIRS)
        return None

    def user_for(self, image: str, task, pristine: Container) -> str:
        return self._numeric_user(image, pristine, task.spec.verifier_user or self.facts(image).user)

    def command(self) -> list[str]:
        return ["bash", "-c", f"{TESTS_CWD}/test.sh"]

    def env(self, task, home: str) -> dict[str, str]:
        """The tests' environment: ``HOME`` from the pristine image, the task's ``[verifier] env`` (its
        ``PATH`` without relative entries) and :data:`HARDENED_ENV`."""
        env = {"HOME": home, **task.spec.verifier_env, **HARDENED_ENV}
        if "PATH" in env:
            env["PATH"] = absolute_path(env["PATH"])
        return env

    # -- the tamper audit --------------------------------------------------------------------
    def audit(self, verifier: Container, image: str, user: str, carry: Carry) -> Watch:
        """A watch of ``verifier``'s file system for the carried files (enter it around the tests)."""
        if not getattr(self.cfg, "tamper_audit", True):
            return Watch(None, frozenset(), note="sandbox.tamper_audit is off")
        layer = host_layer(verifier)
        if layer is None:
            return Watch(None, frozenset(), note="the verifier's file system is not mounted on this host (a remote "
                                                 "or rootless engine, or another storage driver): only the seal holds")
        start = self.facts(image).python.get(user, PythonStart())
        return Watch(layer[1], frozenset(carry.paths), Classifier(start.modules, carry.shadow))

    def tampering(self, task, image: str, record: AuditRecord, is_reference: bool, run_reference) -> list[str]:
        """Why an attempt whose verification ``record`` describes tampered (empty: it did not).
        ``run_reference``: runs the task's reference solution in a trial of its own, for the record
        of its verification when none is kept yet (once per task and image)."""
        if not record.watched:
            return []
        if is_reference:
            self._keep_reference(task, image, record)
            return judge(record, None)
        reference = self.reference_audit(task, image, run_reference) if record.code else None
        return judge(record, reference)

    def _keep_reference(self, task, image: str, record: AuditRecord) -> None:
        with self._lock:
            self._references[(image, task_digest(task))] = record

    def reference_audit(self, task, image: str, run_reference) -> AuditRecord | None:
        """The audit record of the reference solution's verification of ``task`` in ``image``: kept
        from an earlier trial, or from one run now (an infrastructure failure propagates)."""
        key = (image, task_digest(task))
        with self._lock:
            lock = self._reference_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._references:
                    return self._references[key]
            try:
                result = run_reference()
            except InfrastructureError:
                raise
            except Exception as exc:  # noqa: BLE001 - the task's reference could not run: nothing to compare with
                log.exception("%s: the reference solution could not be run to audit its verification", task.name)
                record = AuditRecord(note=f"the reference solution could not be run: {exc!r}")
                with self._lock:
                    self._references[key] = record
                return record
            if result.outcome.value in INFRASTRUCTURE_OUTCOMES:
                raise VerifierError(f"the reference solution's trial, run to audit its verification, was lost to "
                                    f"the infrastructure ({result.outcome.value}: {result.detail[:300]})")
            audit = result.agent_info.get("audit")
            if result.reward is None or not audit:
                log.warning("%s: the reference solution's verification could not be audited (%s: %s)", task.name,
                            result.outcome.value, result.detail[:200])
                record = AuditRecord(note=f"the reference solution's verification ended {result.outcome.value}")
            else:
                record = AuditRecord.from_dict(audit)
            with self._lock:
                self._references[key] = record
            return record


def _agent_passwd(agent: Container, layer: tuple[str, str, frozenset[str]] | None) -> str:
    """The agent's ``/etc/passwd`` (read from its overlay layer, or through the engine's API)."""
    if layer is not None:
        opened = SafeTree(layer[1]).open_regular(accounts.PASSWD)
        if opened is None:
            return ""
        with opened[0] as handle:
            return handle.read(accounts.MAX_BYTES).decode("utf-8", "replace")
    try:
        raw = agent.read_file(accounts.PASSWD, limit=accounts.MAX_BYTES)
    except (docker.errors.APIError, ValueError):
        return ""
    return (raw or b"").decode("utf-8", "replace")


def startup_facts(output: str) -> PythonStart:
    """:class:`PythonStart` from the output of ``python3 -vv -c`` :data:`_STARTUP_PROBE`."""
    path, tried = set(), []
    for line in output.splitlines():
        if line.startswith("AES-PATH "):
            path.add(line[len("AES-PATH "):])
        elif line.startswith("# trying /"):
            tried.append(line[len("# trying "):].strip())
    names = set()
    for item in tried:
        folder, name = posixpath.split(item)
        stem = name.split(".", 1)[0]
        if stem == "__init__":
            folder, stem = posixpath.split(folder)
        if folder in path and _NAME.match(stem):
            names.add(stem)
    return PythonStart(frozenset(names))


def task_digest(task) -> str:
    """A digest of a task's files (environment, tests, solution, task.toml): the reference's audit
    record is kept per digest and image."""
    digest = hashlib.sha256()
    root = task.path
    for path in sorted(root.rglob("*")) if root.is_dir() else ():
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(root).as_posix()
            if rel.split("/")[0] in ("environment", "tests", "solution", "task.toml"):
                with open(path, "rb") as fh:
                    digest.update(rel.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()


TEST_SCRIPT_MAX_BYTES = 1 << 20


def _requirements(task) -> frozenset[str]:
    """Module names of the requirement files in ``tests/`` (``pip install -r /tests/requirements.txt``)."""
    root = task.tests_dir
    lines = []
    for path in sorted(root.glob("**/requirements*.txt")) if root.is_dir() else ():
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= TEST_SCRIPT_MAX_BYTES:
            lines += [line.split("#")[0].strip() for line in path.read_text("utf-8", "replace").splitlines()]
    return installed_by_tests("pip install " + " ".join(line for line in lines if line and not line.startswith("-")))


def _test_scripts(task) -> list[str]:
    """The text of the task's test scripts (shell and Python files in ``tests/``, each at most 1 MiB):
    what the verifier runs, read for the tools it calls and the packages it installs."""
    out: list[str] = []
    root = task.tests_dir
    for path in sorted(root.rglob("*")) if root.is_dir() else ():
        if path.suffix not in (".sh", ".py", ".bash", ".txt", "") or path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size <= TEST_SCRIPT_MAX_BYTES:
            out.append(path.read_text("utf-8", "replace"))
    return out

