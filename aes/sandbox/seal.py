"""What of the agent's work may reach the sealed verifier: the denylist, in one place.

The sealed verifier (:mod:`aes.sandbox.verifier`) runs ``tests/test.sh`` in a fresh container
started from the task's own, pristine image. The agent's file changes are carried into it as
data — except where a change could alter what runs at verification, or how its reward is
written. Each rule below names what it protects and why; :func:`deny_reason` applies them.

Carried (data): the workdir and everything else outside these rules, e.g. ``/app``, ``/srv``,
``/tmp``, ``/home/u/project``, ``/etc/nginx``, ``/etc/passwd`` (modified, never deleted).

Not carried, and why:
  * the verifier's runtime: ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` (interpreters, shells,
    the loader, libc, compilers, system packages);
  * every directory on the image's ``PATH`` (a new name there would shadow a command the
    tests run or install at verification, e.g. ``curl`` before ``apt-get install curl``);
  * interpreter standard and site directories anywhere (``lib/pythonX.Y``, ``site-packages``,
    ``dist-packages``, ``node_modules``) and package metadata (``*.dist-info``, ``*.egg-info``, an
    egg's ``EGG-INFO``, in any case as the metadata finder matches them: their entry points are
    plugins pytest loads), ``pyvenv.cfg`` (a venv's ``home`` picks the stdlib),
    ``sitecustomize.py`` / ``usercustomize.py`` and ``*.pth`` (code run at interpreter start),
    compiled bytecode (``*.pyc``: a sourceless module, or a ``__pycache__`` entry that wins over
    its source; the verifier compiles the carried sources);
  * a Python module (a ``NAME.py``, an extension ``NAME.*.so``, a package's ``__init__`` in any of
    those forms) named like the standard library, an installed package of the image, a package
    the tests install, or a module the image's ``python3`` looks for while it starts (found or
    not: ``sitecustomize``, ``usercustomize``, what its ``.pth`` lines import when present; the
    verifier probes it);
  * files the image already had in any ``bin``/``sbin`` directory (e.g. a venv's ``python`` or
    ``pytest`` under ``/opt``), which tests call by absolute path, or in the service scripts'
    directories (``/etc/init.d``, ``/etc/default``, ``/etc/rc?.d``), which tests start services with;
  * configuration that changes what tools load or run: ``/etc/ld.so.*``, ``alternatives``,
    shell profiles and rc files, ``/etc/python*`` and ``/etc/perl`` (on the interpreters'
    search paths), package-manager configuration and state (``/etc/apt``, ``/var/lib/dpkg``,
    ``pip.conf``, ``uv``, ``npmrc``, ``gitconfig``), CA bundles, ``nsswitch.conf``, and what
    ``su`` reads besides the account database (``login.defs``, ``/etc/default``, ``/etc/skel``);
  * dot-entries in home directories (``~/.local``, ``~/.cache``, ``~/.config``, rc files: where
    uv, pip, git and npm read settings and keep managed interpreters and caches): all of them in
    ``/root`` and ``/home/*``; the tool directories (:data:`HOME_TOOL_DIRS`) of every other home
    the image's ``/etc/passwd`` or ``HOME`` names (a daemon's ``/var/lib/x``, a user whose home is
    the workdir). The verifier runs with ``HOME`` set to the pristine image's home of its user,
    so a changed ``/etc/passwd`` cannot move it;
  * tool configuration by name, wherever it lies (:data:`TOOL_CONFIG_NAMES`: ``pip.conf`` in a
    venv, ``uv.toml``, ``.npmrc``, ``.gitconfig``, shell rc files): a package manager the tests
    run would install what it names;
  * the install prefix of an interpreter environment the tests use: the parent of a ``bin``
    directory on the image's ``PATH`` or of a tool the task's test scripts call by absolute path,
    when the pristine image shows an interpreter there (:data:`INTERPRETER_MARKERS`:
    ``/opt/venv/bin/pip`` protects ``/opt/venv``, its ``pip.conf``, libraries and helpers);
  * top-level files and dot-entries and ``/node_modules``: the tests run in ``/tests``, and
    tools look for configuration in the working directory's ancestors (``/pyproject.toml``,
    ``/uv.toml``, ``/pytest.ini``, ``/conftest.py``, ``/.git``, ``/package.json``);
  * the verifier's own paths ``/tests``, ``/logs``, ``/solution``, and kernel file systems.

A git repository's ``config`` is carried without its command-valued keys (filters, external
diffs, pagers, signature programs, shell aliases: :mod:`aes.sandbox.gitconfig`).

A deletion is carried unless the path is protected or contains a protected root; an agent
cannot delete ``/etc/passwd`` (``docker exec -u`` needs it). Symlinks and hard links are
carried as copies of the file they point to, so no carried path can alias a file the verifier
writes later; a symlink to a directory stays a link when that directory is data the agent may
change (``/app/current -> releases/v2``), never when it leads into scratch space (``/tmp``),
the verifier's paths or a directory that holds protected ones. Dangling links, other links to
directories and special files are dropped.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import PurePosixPath

SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The image's runtime: every tool, interpreter and library the tests run."""

OWN_ROOTS = ("/tests", "/logs", "/solution", "/oracle", "/proc", "/sys", "/dev", "/run/secrets")
"""The verifier's own inputs and outputs, and kernel file systems."""

ETC_NAMES = (
    "ld.so.preload", "ld.so.conf", "ld.so.conf.d", "ld.so.cache", "alternatives", "profile", "profile.d",
    "bash.bashrc", "bashrc", "bash_completion", "bash_completion.d", "environment", "zsh", "zshenv", "zshrc",
    "inputrc", "shells", "nsswitch.conf", "gai.conf", "host.conf", "perl", "apt", "dpkg", "pip.conf", "xdg",
    "uv", "npmrc", "gitconfig", "gemrc", "wgetrc", "ssl", "pki", "ca-certificates", "ca-certificates.conf",
    "security", "pam.d", "sudoers", "sudoers.d", "sudo.conf", "sudo_logsrvd.conf", "R", "julia", "java",
    "mercurial", "ImageMagick-6", "ImageMagick-7", "login.defs", "default", "skel", "securetty", "pam.conf",
    "adduser.conf", "deluser.conf", "update-motd.d",
)
"""Entries of /etc that decide what tools load, run or install (plus :data:`ETC_PREFIXES`), and what
``su``, ``runuser`` and ``useradd`` read besides the account database: ``login.defs`` (the PATH a
switched user gets), ``default`` (pam_env's ``locale`` file sets any variable, ``BASH_ENV`` too;
init scripts source the rest), ``skel`` (the dot-files of a user the tests create)."""

ETC_PREFIXES = ("python", "java-", "php", "ruby", "node")
"""Versioned /etc entries of interpreters (``/etc/python3.11``, ``/etc/java-17-openjdk``,
``/etc/php/8.2/cli/php.ini``, whose ``auto_prepend_file`` runs code in every script)."""

VAR_ROOTS = ("/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf", "/var/lib/ucf",
             "/var/lib/gems")
"""Package-manager state: a planted package list or archive would be installed by ``apt-get``."""

NO_DELETE = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")
"""Carried when modified (a task may add a user), never deleted."""

TOP_DIRS_DENIED = ("node_modules", "venv")
"""Top-level directories tools find from the tests' working directory."""

TOOL_CONFIG_NAMES = frozenset({
    "pip.conf", "pip.ini", "uv.toml", ".npmrc", ".yarnrc", ".yarnrc.yml", ".condarc", "condarc",
    ".pydistutils.cfg", "pydistutils.cfg", ".pypirc", ".gitconfig", ".hgrc", "hgrc", ".curlrc", ".wgetrc",
    ".netrc", ".Rprofile", "Rprofile.site", ".gemrc", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
    ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".kshrc", ".mkshrc", ".inputrc",
})
"""File names that configure a package manager, a VCS or a shell wherever they lie (a venv's
``pip.conf``, a moved home's ``.config/pip/pip.conf``): never a task's deliverable that tests
need as written, and a way to make the tests install or run the agent's code."""

HOME_TOOL_DIRS = frozenset({
    ".config", ".local", ".cache", ".cargo", ".rustup", ".npm", ".node_modules", ".yarn", ".pnpm-store", ".m2",
    ".gradle", ".ivy2", ".sbt", ".gem", ".bundle", ".pyenv", ".conda", ".nvm", ".deno", ".bun", ".ipython",
    ".jupyter", ".julia", ".R", ".pip", ".uv", ".ssh", ".gnupg", ".aws", ".docker", ".kube", ".subversion",
})
"""Dot-directories where tools keep settings, caches and managed interpreters, protected in every
home the image names (all dot-entries of ``/root`` and ``/home/*`` are)."""

SERVICE_DIRS = ("/etc/init.d", "/etc/default", "/etc/rcS.d", *(f"/etc/rc{n}.d" for n in range(7)))
"""Scripts tests start services with (``service x start``, ``/etc/init.d/x start``) and the
shell fragments they source: the image's own are not replaced by the agent's."""

_CODE_COMPONENT = re.compile(r"^(site-packages|dist-packages|node_modules|.+\.dist-info|.+\.egg-info|.+\.egg-link|"
                             r"egg-info|.+\.egg)$", re.IGNORECASE)
"""Installed code and its metadata: a ``*.dist-info`` next to what the tests import (the
working directory, ``PYTHONPATH``) registers entry points, and pytest loads every ``pytest11``
plugin it finds there. Matched as the import system's metadata finder matches them: in any case
(``EVIL-1.0.DIST-INFO``), and an egg's ``EGG-INFO``."""
_BYTECODE = (".pyc", ".pyo")
"""Compiled Python: the verifier's interpreter compiles the carried sources itself. A carried
``.pyc`` would run code its source does not show (a sourceless module, or a ``__pycache__`` entry
that wins over its source)."""
_MODULE_FILE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_-]+)*\.(py|pyc|pyo|so)$")


def module_name(path: str) -> str | None:
    """The top-level module name a Python file provides from its own directory (an ``__init__``
    file, in any of the suffixes the import system loads: its package's name), or None when it
    is not a module file."""
    parts = [p for p in path.split("/") if p]
    found = _MODULE_FILE.match(parts[-1]) if parts else None
    if not found:
        return None
    stem = found.group(1)
    if stem == "__init__":
        parent = parts[-2] if len(parts) >= 2 else ""
        return parent if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", parent) else None
    return stem
_PY_STDLIB = re.compile(r"^python[0-9.]*$")
_STARTUP_FILES = ("sitecustomize.py", "usercustomize.py", "pyvenv.cfg")
_BIN_DIRS = ("bin", "sbin")
_HOME_PARENTS = ("/home",)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _clean(path: str) -> str:
    """``path`` absolute, without empty or ``.`` components (``..`` kept, as ``PurePosixPath`` does)."""
    path = "/" + path.lstrip("/")
    if "//" in path or "/./" in path or path.endswith(("/", "/.")):
        return str(PurePosixPath(path))
    return path


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def path_dirs(image_env: dict[str, str] | None) -> tuple[str, ...]:
    """The absolute directories of the image's ``PATH`` (Docker's default when it sets none)."""
    value = (image_env or {}).get("PATH") or DEFAULT_PATH
    out = []
    for entry in value.split(":"):
        if entry.startswith("/"):
            out.append(str(PurePosixPath(entry)))
    return tuple(dict.fromkeys(out))


TOOL_DIR_VARS = (
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DIR", "MAMBA_ROOT_PREFIX", "PYENV_ROOT", "UV_CACHE_DIR",
    "UV_PYTHON_INSTALL_DIR", "UV_TOOL_DIR", "UV_TOOL_BIN_DIR", "UV_PROJECT_ENVIRONMENT", "PIP_CACHE_DIR",
    "PIPX_HOME", "PIPX_BIN_DIR", "POETRY_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
    "CARGO_HOME", "RUSTUP_HOME", "GOROOT", "GOMODCACHE", "GOCACHE", "JAVA_HOME", "NVM_DIR", "NPM_CONFIG_PREFIX",
    "NPM_CONFIG_CACHE", "PNPM_HOME", "BUN_INSTALL", "DENO_DIR", "GEM_HOME", "GEM_PATH", "BUNDLE_PATH",
)
"""Image variables naming where a toolchain keeps interpreters, packages or caches: protected."""

SHADOW_TOOLS = frozenset({
    "pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "exceptiongroup", "tomli", "hypothesis",
    "coverage", "xdist", "attr", "attrs", "typing_extensions", "six", "setuptools", "pkg_resources",
    "_distutils_hack", "pip", "numpy", "pandas", "yaml", "requests", "urllib3", "certifi", "idna",
    "charset_normalizer", "jsonschema", "dateutil", "pytz", "colorama", "pygments",
    "bs4", "lxml", "httpx", "aiohttp", "flask", "werkzeug", "jinja2", "markupsafe", "click", "rich", "pydantic",
    "scipy", "sklearn", "matplotlib", "PIL", "torch", "polars", "pyarrow", "duckdb", "sqlalchemy", "psycopg2",
    "redis", "boto3", "botocore", "toml", "orjson", "ujson", "freezegun", "responses", "requests_mock", "mock",
    "deepdiff", "tabulate", "openpyxl", "xlrd", "docx", "pypdf", "PyPDF2", "networkx", "sympy", "tqdm",
    "joblib", "cv2", "playwright", "selenium", "fastapi", "starlette", "uvicorn", "anyio", "sniffio",
})
"""Modules tests commonly import, shadowed by a same-named module next to what they run (the
image's own modules and what the test scripts install are added per task)."""

_WITH = re.compile(r"--with(?:=|\s+)['\"]?([A-Za-z][A-Za-z0-9._-]*)")
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\s+([^;&|\n]*)")
_REQUIREMENT = re.compile(r"^['\"]?([A-Za-z][A-Za-z0-9._-]*)")


def installed_by_tests(script: str) -> frozenset[str]:
    """Module names of packages a test script installs at verification (``--with X``, ``pip install
    X Y``, ``uv pip install X``): not in the pristine image, so not among its modules, and imported by
    the tests (a distribution named like its module; :data:`SHADOW_TOOLS` has common others)."""
    names = [m.group(1) for m in _WITH.finditer(script)]
    for line in _PIP_INSTALL.finditer(script):
        for token in line.group(1).split():
            found = None if token.startswith("-") else _REQUIREMENT.match(token)
            if found:
                names.append(found.group(1))
    return frozenset(n.split("[")[0].replace("-", "_").replace(".", "_").lower() for n in names)


def _shadow_prefix(module: str) -> bool:
    """Pytest plugins and pytest's own modules: installed at verification time by many test
    scripts (``uvx --with pytest-...``), so not in the pristine image's module list."""
    return module.startswith(("pytest", "_pytest"))


def shadow_names(image_modules: frozenset[str] | None = None) -> frozenset[str]:
    """Module names a carried ``NAME.py`` (or package) must not take."""
    return frozenset(sys.stdlib_module_names) | SHADOW_TOOLS | (image_modules or frozenset())


class SealPolicy:
    """The denylist for one image: the fixed rules plus its ``PATH`` directories, the toolchain
    directories its environment names, the install prefixes of its tools, its users' homes and
    the module names its python3 can import.

    ``homes``: home directories from the pristine image's ``/etc/passwd``; ``prefixes``: install
    prefixes of the image's interpreter environments (:func:`prefix_candidates` lists where to
    look; the verifier keeps those the pristine image shows to hold an interpreter).
    """

    def __init__(self, image_env: dict[str, str] | None = None, shadow: frozenset[str] | None = None,
                 workdir: str | None = None, homes: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()):
        self.path_dirs = path_dirs(image_env)
        self.homes = _homes(homes, image_env)
        self.tool_dirs = tool_dirs(image_env, workdir)
        self.prefixes = tuple(dict.fromkeys(str(PurePosixPath(p)) for p in prefixes))
        self.shadow = shadow_names(shadow)

    def deny_reason(self, path: str, is_dir: bool | None = None) -> str | None:
        """Why a change at absolute ``path`` is not carried (None: it is carried); ``is_dir``:
        whether the changed entry is a directory (None: unknown, e.g. a deletion)."""
        path = _clean(path)
        if path == "/":
            return "the root directory itself"
        for root in OWN_ROOTS:
            if _under(path, root):
                return f"{root} belongs to the verifier"
        for root in SYSTEM_ROOTS:
            if _under(path, root):
                return f"{root} holds the verifier's runtime"
        for root in self.path_dirs:
            if _under(path, root):
                return f"{root} is on the image's PATH"
        for root in self.tool_dirs:
            if _under(path, root):
                return f"{root} is a toolchain directory the image's environment names"
        for root in self.prefixes:
            if _under(path, root):
                return f"{root} is the install prefix of an interpreter the tests run"
        parts = tuple(path.split("/")[1:])
        if len(parts) == 1:
            name = parts[0]
            if name.startswith("."):
                return "top-level dot-entries configure tools run from /tests"
            if name in TOP_DIRS_DENIED:
                return f"/{name} would be found by tools run from /tests"
            if is_dir is False:
                return "top-level files configure tools run from /tests"
        if parts[0] == "etc" and len(parts) >= 2 and (parts[1] in ETC_NAMES or parts[1].startswith(ETC_PREFIXES)):
            return f"/etc/{parts[1]} configures what tools load or run"
        for root in VAR_ROOTS:
            if _under(path, root):
                return f"{root} is package-manager state"
        if self._home_dot_entry(path, parts):
            return "dot-entries of home directories hold tool settings, caches and managed interpreters"
        if parts[-1] in TOOL_CONFIG_NAMES:
            return f"{parts[-1]} configures a package manager, a VCS or a shell"
        for i, part in enumerate(parts):
            if _CODE_COMPONENT.match(part):
                return f"{part} holds installed code"
            if _PY_STDLIB.match(part) and i > 0 and parts[i - 1] in ("lib", "lib32", "lib64"):
                return "an interpreter's standard library"
        name = parts[-1]
        if name in _STARTUP_FILES or name.endswith(".pth"):
            return f"{name} runs or configures code at interpreter start"
        if name.endswith(_BYTECODE) and is_dir is not True:
            return "compiled Python bytecode (the verifier compiles the sources)"
        if is_dir is not True and self._shadows(parts):
            return "a module named like the standard library or an installed package (it would shadow it)"
        return None

    def _shadows(self, parts: tuple[str, ...]) -> bool:
        module = module_name("/" + "/".join(parts))
        return module is not None and (module in self.shadow or _shadow_prefix(module))

    def _home_dot_entry(self, path: str, parts: tuple[str, ...]) -> bool:
        if _home_dot_entry(parts):
            return True
        for home in self.homes:
            if path != home and _under(path, home) and path[len(home.rstrip("/")) + 1:].split("/")[0] in HOME_TOOL_DIRS:
                return True
        return False

    def in_bin_dir(self, path: str) -> bool:
        """``path`` lies directly in a ``bin``/``sbin`` directory or a service-script directory: if
        the image had it, it is a tool tests may call by absolute path (a venv's ``python``, an
        init script), and it is not carried."""
        parent = posixpath.dirname(path)
        return posixpath.basename(parent) in _BIN_DIRS or parent in SERVICE_DIRS

    MODIFIED_TOOL = "the image's own tools in bin and service-script directories"

    def deny_deletion(self, path: str) -> str | None:
        """Why deleting ``path`` is not carried (None: it is)."""
        reason = self.deny_reason(path)
        if reason:
            return reason
        if path in NO_DELETE:
            return f"{path} is needed to run commands as a user"
        if self.contains_protected(path):
            return f"{path} contains protected paths"
        return None

    def contains_protected(self, path: str) -> bool:
        """``path`` is an ancestor of a protected root (deleting or replacing it would remove one)."""
        roots = (*OWN_ROOTS, *SYSTEM_ROOTS, *self.path_dirs, *self.tool_dirs, *self.prefixes, *VAR_ROOTS, *NO_DELETE,
                 "/etc", "/root")
        prefix = path.rstrip("/") + "/"
        if any(root.startswith(prefix) for root in roots):
            return True
        parts = tuple(p for p in path.split("/") if p)
        return parts in (("home",),) or (len(parts) == 2 and parts[0] == "home")


def tool_dirs(image_env: dict[str, str] | None, workdir: str | None) -> tuple[str, ...]:
    """Directories the image's toolchain variables name (never ``/`` or the workdir or above it)."""
    out = []
    for key in TOOL_DIR_VARS:
        for entry in ((image_env or {}).get(key) or "").split(":"):
            if not entry.startswith("/"):
                continue
            entry = str(PurePosixPath(entry))
            if entry == "/" or (workdir and _under(workdir, entry)):
                continue
            out.append(entry)
    return tuple(dict.fromkeys(out))


PREFIXES_NOT_PROTECTED = ("/", "/usr", "/usr/local", "/home", "/root", "/opt", "/srv", "/var", "/tmp", "/etc")
"""Parents of bin directories that are system-wide, not one toolchain's prefix (``/usr`` is
protected as the runtime anyway)."""

INTERPRETER_MARKERS = ("pyvenv.cfg", "conda-meta", "lib/node_modules", "bin/python", "bin/python3", "bin/node",
                       "bin/ruby", "bin/perl", "bin/java", "bin/php", "bin/Rscript", "bin/julia")
"""What makes a prefix an interpreter environment (a venv, conda, node, a JDK, ...) rather than
a project's own directory (``/srv/app/bin/server``, whose code may be the agent's work)."""

_ABS_TOOL = re.compile(r"(?<![\w.$-])(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*)/s?bin/[A-Za-z0-9_.+-]+")


def tools_in(script: str) -> tuple[str, ...]:
    """Absolute ``.../bin/NAME`` paths a test script names (``/opt/venv/bin/pytest``)."""
    return tuple(dict.fromkeys(m.group(0) for m in _ABS_TOOL.finditer(script)))


def prefix_candidates(path_dir_list: tuple[str, ...], tools: tuple[str, ...], workdir: str | None,
                      homes: tuple[str, ...]) -> tuple[str, ...]:
    """The install prefix (parent of ``bin``/``sbin``) of each ``PATH`` directory and each tool the
    tests run by absolute path, unless that is a system-wide directory, a user's home, or the
    workdir or one of its ancestors (where the agent works)."""
    out = []
    for entry in (*path_dir_list, *(str(PurePosixPath(t).parent) for t in tools)):
        path = PurePosixPath(entry)
        if path.name not in _BIN_DIRS:
            continue
        prefix = str(path.parent)
        user_home = len(path.parent.parts) == 3 and path.parent.parts[1] == "home"
        if prefix in PREFIXES_NOT_PROTECTED or prefix in homes or user_home or any(
                _under(prefix, root) for root in SYSTEM_ROOTS):
            continue
        if workdir and _under(str(PurePosixPath(workdir)), prefix):
            continue
        out.append(prefix)
    return tuple(dict.fromkeys(out))


def _homes(homes: tuple[str, ...], image_env: dict[str, str] | None) -> tuple[str, ...]:
    out = [str(PurePosixPath(h)) for h in homes if h.startswith("/")]
    home = (image_env or {}).get("HOME", "")
    if home.startswith("/"):
        out.append(str(PurePosixPath(home)))
    return tuple(h for h in dict.fromkeys(out) if h not in ("/",) and not any(
        h == root or _under(h, root) for root in (*SYSTEM_ROOTS, *OWN_ROOTS)))


def _home_dot_entry(parts: tuple[str, ...]) -> bool:
    if len(parts) >= 2 and parts[0] == "root" and parts[1].startswith("."):
        return True
    return len(parts) >= 3 and parts[0] == "home" and parts[2].startswith(".")
