"""Admission's inspection of a built image for start-up hooks that load what the agent can write.

A hostile proposal can bake a hook into its image that does nothing until a file appears: a
``.pth`` line importing a module the image does not have while ``/app`` is on ``PYTHONPATH``, a
``sitecustomize`` that runs ``/app/x.py``, an ``/etc/ld.so.preload`` entry, a shell profile that
sources a file in the workdir, ``ENV BASH_ENV=/tmp/x``. The reference's output (or any solver's)
then arms it, and code of the agent's runs in every process of that kind, the tests' included.

What runs at a process's start, by mechanism:

* Python: each site directory's ``*.pth`` lines that begin with ``import`` (executed), and the
  ``sitecustomize`` / ``usercustomize`` modules found on the start-up import path;
* the dynamic loader: ``/etc/ld.so.preload``;
* shells: the profile and rc files (``/etc/profile``, ``/etc/profile.d/*``, ``/etc/bash.bashrc``,
  each home's ``.bashrc``, ``.profile``, ...), and the files ``BASH_ENV`` / ``ENV`` name: the paths
  they run or source (at a command's position, after ``.``, ``source``, ``exec``, ``sh``);
* the image's environment: start-up variables (:mod:`aes.tasks.startup`: loader, shell and
  interpreter hooks, tools' options that load code), ``PATH``, ``PYTHONPATH`` and ``HOME`` aside
  (the sealed verifier handles those).

Only hooks the task's build added or changed are judged (their content is not the base image's,
nor a copy of the base's ``/etc/skel``); a prebuilt ``docker_image`` has no base, so all of its
hooks are. A hook is rejected (``build.startup_hook``, naming it) when it loads, imports or names
a path the agent can write: one that does not exist in the image outside its runtime (``/usr``,
``/bin``, ``/sbin``, ``/lib*``: whoever creates it later arms the hook), one in the workdir, a home
(but its dot-entries, which the sealed verifier never takes from the agent's work) or scratch space
(``/tmp``, ``/var/tmp``, ``/dev/shm``), or one the agent's user may write; a
module it imports that resolves there, or that the image lacks while such a directory is on the
start-up path; and code that computes what it loads (``exec``, ``open``, ``__import__`` of a
value that is not a constant), or a start-up module that exists only as bytecode.

The listing is made by the image's own ``python3`` (isolated mode, no site, start-up variables
cleared, as root, no network); an image without one gets the loader and environment checks only,
read through the engine. An image whose ``python3`` itself is a lie is out of this check's reach
(its tests run that ``python3`` too).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import threading
from pathlib import Path

from aes.sandbox.container import Container
from aes.tasks import Reason
from aes.tasks.startup import RUNTIME_ROOTS, startup_variable

log = logging.getLogger(__name__)

PROBE = Path(__file__).with_name("hook_probe.py")
FACTS = "/tmp/aes-startup-hooks.json"
FACTS_MAX_BYTES = 64 << 20
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/run/lock", "/var/lock")
OPTION_VARIABLES = ("NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
                    "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
"""Variables whose value is options; some options load code (:data:`_LOADS`)."""
SEAL_HANDLES = ("PATH", "PYTHONPATH", "HOME", "XDG_RUNTIME_DIR")
"""Image variables the sealed verifier handles itself (what is not carried on the search paths, HOME
pinned to the pristine account's home, whose dot-entries are never carried): not judged here."""
_LOADS = re.compile(r"(?:^|\s)(?:-r|--require|--import|--loader|--experimental-loader|-M|-m|-javaagent|-agentpath|"
                    r"-agentlib|-p(?!\s*no:))(?=[\s=:]|\S)")
_PATHS = re.compile(r"(?:^|[\s=:,;])((?:\.{1,2})?/[^\s=:,;]*)")


class HookInspector:
    """Runs the probe once per (image, base, workdir, agent user) and judges what it lists."""

    def __init__(self, sandbox):
        self.sandbox = sandbox
        self._facts: dict[tuple, dict] = {}
        self._lock = threading.Lock()

    def reasons(self, image: str, base: str | None, task) -> list[Reason]:
        """Rejections for the start-up hooks ``image``'s build added over ``base`` (None: every hook)."""
        env = self._env(image)
        workdir = task.spec.workdir or self._workdir(image)
        uid = self._agent_uid(image, task)
        facts = self.facts(image, env, uid, _env_paths(env))
        if base is not None:
            base_env = self._env(base)
            base_facts = self.facts(base, base_env, uid, [])
            known = {h["sha256"] for h in base_facts.get("hooks", [])} | set(base_facts.get("skel", []))
        else:
            base_env, known = {}, set()
        judge = _Judge(facts, workdir)
        found = []
        for hook in facts.get("hooks", []):
            if hook["sha256"] not in known:
                found += [f"{hook['file']} {why}" for why in judge.hook(hook)]
        for name, value in env.items():
            if base_env.get(name) != value and name not in SEAL_HANDLES:
                found += [f"ENV {name}={value[:120]} {why}" for why in judge.variable(name, value)]
        return [Reason("build.startup_hook", (
            f"the image runs start-up code that loads what the agent can write: {what}. Whoever writes that "
            "path (the agent, or the reference's output) runs code in every process that starts there, the "
            "tests' included; a task's image may not carry such hooks")) for what in dict.fromkeys(found)]

    # -- facts -----------------------------------------------------------------------------------
    def facts(self, image: str, env: dict[str, str], uid: int | None, paths: list[str]) -> dict:
        key = (self._image_id(image), uid, tuple(paths))
        with self._lock:
            if key in self._facts:
                return self._facts[key]
        facts = self._probe(image, env, uid, paths)
        with self._lock:
            return self._facts.setdefault(key, facts)

    def _probe(self, image: str, env: dict[str, str], uid: int | None, paths: list[str]) -> dict:
        box = self.sandbox
        container = box.run_container(image, cpus=1.0, memory_mb=1024, network="none", role="inspect",
                                      entrypoint=["/bin/sh", "-c", "sleep 600"], workdir="/")
        try:
            quiet = {name: "" for name in env if startup_variable(name, env[name]) and name != "PATH"}
            args = json.dumps({"env": env, "agent_uid": uid, "paths": paths, "out": FACTS})
            run = container.exec(["sh", "-c", 'p=$(command -v python3 || command -v python) || exit 127; '
                                  'exec "$p" -I -S -c "$0" "$1"',
                                  PROBE.read_text(), args], 120, user="0", workdir="/", env=quiet)
            data = container.read_file(FACTS, limit=FACTS_MAX_BYTES) if run.exit_code == 0 else None
            if data is not None:
                try:
                    return json.loads(data)
                except ValueError:
                    log.warning("the start-up hook probe of %s wrote no JSON", image)
            elif run.exit_code not in (126, 127):
                log.warning("the start-up hook probe of %s failed (exit %s): %s", image, run.exit_code, run.output[-300:])
            return {"hooks": _preload_only(container), "paths": {}, "modules": {}, "startup_path": [], "homes": [],
                    "python": None}
        finally:
            container.remove()

    def _image_id(self, image: str) -> str:
        return self.sandbox.client.api.inspect_image(image).get("Id") or image

    def _config(self, image: str) -> dict:
        return self.sandbox.client.api.inspect_image(image).get("Config") or {}

    def _env(self, image: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self._config(image).get("Env") or [] if "=" in item)

    def _workdir(self, image: str) -> str:
        return str(self._config(image).get("WorkingDir") or "/")

    def _agent_uid(self, image: str, task) -> int | None:
        user = (task.spec.agent_user or str(self._config(image).get("User") or "")).split(":")[0]
        return int(user) if user.isdigit() else (0 if user in ("", "root") else None)


class _Judge:
    """Whether what a hook names is the agent's to write (the rules in the module's docstring)."""

    def __init__(self, facts: dict, workdir: str):
        self.paths = facts.get("paths") or {}
        self.modules = facts.get("modules") or {}
        self.homes = [h for h in facts.get("homes") or [] if h != "/"]
        self.workdir = posixpath.normpath(workdir) if workdir and workdir != "/" else None
        self.startup = [p for p in facts.get("startup_path") or [] if self.writable(p)]

    def writable(self, path: str) -> str | None:
        """Why the agent can write ``path``, or None."""
        if not path.startswith("/"):
            return "is relative: it resolves from the working directory"
        path = posixpath.normpath(path)
        fact = self.paths.get(path) or self.paths.get(path + "/") or {}
        in_runtime = _under(path, RUNTIME_ROOTS)
        home = next((h for h in self.homes if _under(path, (h,))), None)
        if home and path[len(home):].lstrip("/").startswith("."):
            return None  # a home's dot-entries (rc files, ~/.local, ~/.config) never come from the agent's work
        if fact and not fact.get("exists") and not in_runtime:
            return "does not exist in the image (whoever creates it arms the hook)"
        if self.workdir and _under(path, (self.workdir,)):
            return f"lies in the workdir {self.workdir}"
        if _under(path, SCRATCH):
            return "lies in scratch space"
        if home:
            return f"lies in the home {home}"
        if fact.get("writable"):
            return "is writable by the agent's user"
        return None

    def hook(self, hook: dict) -> list[str]:
        out = []
        if hook.get("binary") and hook["kind"] in ("pth", "python"):
            return ["is a start-up module that exists only as bytecode (it cannot be read)"]
        for call in hook.get("dynamic") or []:
            out.append(f"calls {call}() with a value it computes")
        for module in hook.get("imports") or []:
            origin = self.modules.get(module, None)
            if origin is None and self.startup:
                out.append(f"imports {module}, which the image does not have, while {self.startup[0]} on Python's "
                           f"start-up path {self.writable(self.startup[0])}")
            elif origin and origin != "builtin" and self.writable(origin):
                out.append(f"imports {module} from {origin}, which {self.writable(origin)}")
        for ref in hook.get("refs") or []:
            why = self.writable(ref)
            if why:
                out.append(f"names {ref}, which {why}")
            elif hook["kind"] == "preload" and not _under(posixpath.normpath(ref), RUNTIME_ROOTS):
                out.append(f"preloads {ref}, outside the image's runtime (/usr, /lib)")
        return out

    def variable(self, name: str, value: str) -> list[str]:
        if not startup_variable(name, value):
            return []
        out = [f"names {path}, which {self.writable(path)}" for path in _paths_in(value) if self.writable(path)]
        if name in OPTION_VARIABLES and _LOADS.search(" " + value):
            out.append("loads code named by an option")
        return out


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _paths_in(value: str) -> list[str]:
    return [m.group(1) for m in _PATHS.finditer(value) if m.group(1) not in ("/", "")]


def _env_paths(env: dict[str, str]) -> list[str]:
    """Absolute paths the image's start-up variables name (the probe reports whether each exists)."""
    return sorted({posixpath.normpath(p) for name, value in env.items() if startup_variable(name, value)
                   for p in _paths_in(value) if p.startswith("/")})


def _preload_only(container: Container) -> list[dict]:
    """Without a Python in the image: ``/etc/ld.so.preload``, read through the engine."""
    import hashlib

    data = container.read_file("/etc/ld.so.preload")
    if data is None:
        return []
    text = data.decode("utf-8", "replace")
    refs = sorted({w for w in re.split(r"[\s:]+", text) if w.startswith("/")})
    return [{"file": "/etc/ld.so.preload", "kind": "preload", "sha256": hashlib.sha256(data).hexdigest(),
             "text": text, "binary": False, "imports": [], "refs": refs, "dynamic": []}]
