"""Run inside a task image (``python3 -I -S``, as root, no network): list the code that runs when a
process starts there, and the facts needed to judge it. Nothing of what it finds is imported or run.

Input (argv[1], JSON): ``env`` (the image's environment), ``agent_uid`` (the agent's uid or null),
``paths`` (extra paths to report on), ``out`` (where to write). Output (JSON, in ``out``): ``hooks``
(file, kind, sha256, imports, refs: paths it names, dynamic: loaders it calls with computed values),
``startup_path`` (Python's import path at a normal start), ``modules`` (top-level module -> file it
resolves to, "builtin", or null), ``paths`` (path -> exists, and writable by the agent's user),
``homes`` (account homes), ``skel`` (sha256 of /etc/skel's files).

Kept compatible with old Pythons (3.6+): it runs with whatever python3 the image has.
"""

import ast
import glob
import hashlib
import importlib.machinery
import json
import os
import re
import sys

MAX_TEXT = 1 << 16
SHELL_FILES = ("/etc/profile", "/etc/bash.bashrc", "/etc/bashrc", "/etc/environment", "/etc/zsh/zshenv",
               "/etc/zsh/zprofile", "/etc/zsh/zshrc", "/etc/zshenv", "/etc/zshrc", "/etc/mkshrc", "/etc/kshrc")
HOME_FILES = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile", ".kshrc",
              ".mkshrc")
LOADERS = ("exec", "eval", "compile", "open", "__import__", "import_module", "run_path", "run_module",
           "execfile", "system", "popen", "Popen", "run", "call", "check_call", "check_output", "load_source",
           "spec_from_file_location", "SourceFileLoader", "execv", "execl", "spawnv")


def read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_TEXT)
    except (OSError, ValueError):
        return None


def digest(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


SYSTEM = ("/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/dev", "/proc", "/sys", "/etc")


def homes():
    """Home directories of the image's accounts that exist (not the system directories daemons get)."""
    out = ["/root"]
    for line in (read("/etc/passwd") or b"").decode("utf-8", "replace").splitlines():
        fields = line.split(":")
        home = fields[5].rstrip("/") if len(fields) >= 7 else ""
        if home.startswith("/") and os.path.isdir(home) and not any(home == r or home.startswith(r + "/") for r in SYSTEM):
            out.append(home)
    return sorted(set(out))


def site_dirs(all_homes):
    import site

    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    version = "python%d.%d" % sys.version_info[:2]
    for home in all_homes:
        user = os.path.join(home, ".local", "lib", version, "site-packages")
        if os.path.isdir(user):
            dirs.append(user)
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def hook(found, path, kind):
    path = os.path.realpath(path) if kind != "shell" else path
    if not os.path.isfile(path) or any(h["file"] == path for h in found):
        return
    data = read(path) or b""
    found.append({"file": path, "kind": kind, "sha256": digest(path),
                  "text": data.decode("utf-8", "replace"), "binary": b"\0" in data})


def python_hooks(found, startup, sites):
    for directory in sites:
        for pth in sorted(glob.glob(os.path.join(directory, "*.pth"))):
            hook(found, pth, "pth")
    finder = importlib.machinery.PathFinder
    for name in ("sitecustomize", "usercustomize"):
        try:
            spec = finder.find_spec(name, startup)
        except Exception:  # noqa: BLE001 - a broken path entry: nothing found there
            spec = None
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            hook(found, spec.origin, "python")


def shell_hooks(found, all_homes, env):
    for path in SHELL_FILES:
        hook(found, path, "shell")
    for path in sorted(glob.glob("/etc/profile.d/*")):
        hook(found, path, "shell")
    for home in all_homes:
        for name in HOME_FILES:
            hook(found, os.path.join(home, name), "shell")
    for var in ("BASH_ENV", "ENV"):
        if env.get(var, "").startswith("/"):
            hook(found, env[var], "shell")
    hook(found, "/etc/ld.so.preload", "preload")


def const_str(node):
    value = getattr(node, "value", getattr(node, "s", None))
    return value if isinstance(value, str) and type(node).__name__ in ("Constant", "Str") else None


SHELL_PATH = re.compile(r"(?:^|[\s'\"=:;(`])((?:~|\$HOME|\$\{HOME\})?/[^\s'\"`;|&<>()$:#]+)")
SHELL_RUN = re.compile(r"(?:^|[;&|(`{]|\bthen\b|\bdo\b|\belse\b)[ \t]*(?:(?:\.|source|exec|command|eval|sh|bash|dash|zsh)"
                       r"[ \t]+)?[\"']?((?:~|\$HOME|\$\{HOME\})?/[^\s'\"`;|&<>()$:#]+)", re.MULTILINE)
"""A path a shell runs or sources: at a command's position, or after ``.``, ``source``, ``exec``, ``sh``."""
SHELL_COMMENT = re.compile(r"(^|\s)#.*$", re.MULTILINE)


def analyse(found, all_homes):
    """Each hook's imports, the paths it names and the loaders it calls with computed arguments."""
    for h in found:
        h["imports"], h["refs"], h["dynamic"] = [], [], []
        if h["binary"]:
            continue
        if h["kind"] in ("shell", "preload"):
            own = [home for home in all_homes if h["file"].startswith(home + "/")]
            pattern = SHELL_RUN if h["kind"] == "shell" else SHELL_PATH
            for match in pattern.finditer(SHELL_COMMENT.sub("", h["text"])):
                ref = match.group(1).rstrip(".")
                if ref.startswith(("~", "$HOME", "${HOME}")):
                    tail = ref.split("/", 1)[1]
                    h["refs"] += [os.path.join(home, tail) for home in (own or all_homes)]
                elif "*" not in ref:
                    h["refs"].append(ref)
            h["refs"] = sorted(set(h["refs"]))
            continue
        lines = [l for l in h["text"].splitlines() if re.match(r"^import[ \t]", l)] if h["kind"] == "pth" else [h["text"]]
        for line in lines:
            try:
                tree = ast.parse(line)
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    h["imports"] += [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    h["imports"].append(node.module.split(".")[0])
                elif isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                    if name not in LOADERS:
                        continue
                    values = [const_str(a) for a in node.args[:1]]
                    if not values or values[0] is None:
                        h["dynamic"].append(name)
                    elif name in ("__import__", "import_module"):
                        h["imports"].append(values[0].split(".")[0])
                else:
                    value = const_str(node)
                    if value and value.startswith("/") and "\n" not in value:
                        h["refs"].append(value)
        h["imports"] = sorted(set(n for n in h["imports"] if n))
        h["refs"] = sorted(set(h["refs"]))
        h["dynamic"] = sorted(set(h["dynamic"]))


def resolve(modules, startup):
    out = {}
    finder = importlib.machinery.PathFinder
    for name in modules:
        if name in sys.builtin_module_names:
            out[name] = "builtin"
            continue
        try:
            spec = finder.find_spec(name, startup)
        except Exception:  # noqa: BLE001 - reported as not found
            spec = None
        origin = None
        if spec is not None:
            origin = spec.origin if spec.origin and spec.origin not in ("built-in", "frozen") else "builtin"
            if spec.origin is None and spec.submodule_search_locations:
                origin = list(spec.submodule_search_locations)[0]
        out[name] = origin
    return out


def path_facts(paths, agent_uid):
    out = {}
    for path in paths:
        exists = os.path.lexists(path)
        writable = False
        if agent_uid not in (None, 0):
            probe = path
            while probe and not os.path.lexists(probe):
                probe = os.path.dirname(probe.rstrip("/")) or "/"
            try:
                st = os.stat(probe)
                writable = bool(st.st_mode & 0o002) or (st.st_uid == agent_uid and bool(st.st_mode & 0o200))
            except OSError:
                writable = False
        out[path] = {"exists": exists, "writable": writable}
    return out


def main():
    args = json.loads(sys.argv[1])
    env = args.get("env") or {}
    all_homes = homes()
    sites = site_dirs(all_homes)
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(":")]
    stdlib = [p for p in sys.path if p]
    startup = list(dict.fromkeys([p or "." for p in pythonpath if env.get("PYTHONPATH")] + stdlib + sites))
    found = []
    python_hooks(found, startup, sites)
    shell_hooks(found, all_homes, env)
    analyse(found, all_homes)
    modules = resolve(sorted(set(m for h in found for m in h["imports"])), startup)
    skel = [digest(p) for p in sorted(glob.glob("/etc/skel/.*") + glob.glob("/etc/skel/*")) if os.path.isfile(p)]
    paths = list(args.get("paths") or []) + [p for p in startup if p.startswith("/")]
    paths += [r for h in found for r in h["refs"]]
    paths += [o for o in modules.values() if o and o.startswith("/")]
    for h in found:
        del h["text"]
    facts = {"hooks": found, "startup_path": startup, "modules": modules, "homes": all_homes, "skel": skel,
             "paths": path_facts(sorted(set(paths)), args.get("agent_uid")), "python": sys.version.split()[0]}
    with open(args["out"], "w") as fh:
        json.dump(facts, fh)


if __name__ == "__main__":
    main()
