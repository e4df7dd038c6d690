"""Environment variables that make a process load or run code: the loader's, shells', interpreters'
and tools' start-up hooks.

A task's ``[environment.env]`` and ``[verifier.env]`` are applied after aes has cleared such
variables from the image's environment for the verifier (:mod:`aes.sandbox.verifier`), so a task
may not set them there at all: whoever writes the file one names (the agent, or the reference's
output) runs code in the tests' processes. They are grouped by the mechanism that loads the code:

* the dynamic loader: every ``LD_*`` (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``LD_AUDIT``, ...),
  glibc's module and locale paths (``GCONV_PATH``, ``LOCPATH``, ...) and tunables;
* shells: files a shell sources at start (``BASH_ENV``, ``ENV``, ``ZDOTDIR``), exported functions
  (``BASH_FUNC_*``), options and prompts that run commands (``SHELLOPTS``, ``PROMPT_COMMAND``, ``PS4``);
* interpreters: every ``PYTHON*`` variable but a few that only change output or hashing, and the
  option, library and start-up variables of Perl, Ruby, Node, Java, .NET, R, Tcl, Lua and PHP;
* tools the tests run: test runners' plugin and option variables (``PYTEST_*``), every ``GIT_*``
  but the author's and committer's identity, package managers' indexes and configuration
  (``PIP_*``, ``UV_*``, ``NPM_CONFIG_*``), pagers and editors, OpenSSL's configuration and engines;
* where tools find their configuration: ``HOME``, ``XDG_*``;
* programs build tools run: compilers and linkers (``CC``, ``LD``, ...), ``SHELL``, ``MAKEFLAGS``;
* where commands and modules are looked up: ``PATH`` and ``PYTHONPATH``, unless every entry lies
  in the image's runtime (``/usr``, ``/bin``, ``/sbin``, ``/lib*``), which the agent's changes never
  reach. A task that needs the workdir on a search path says so in its Dockerfile (``ENV``), where
  the sealed verifier and admission's image inspection see it.
"""

from __future__ import annotations

import posixpath
import re

RUNTIME_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The image's runtime: the agent's changes never reach the verifier there."""

_PREFIXES = {
    "LD_": "the dynamic loader (preloaded libraries, library paths, audit modules)",
    "BASH_FUNC_": "bash's exported functions (a function named like a command replaces it)",
    "PYTHON": "Python's start-up (module paths, start-up scripts, warnings filters that import modules)",
    "PERL": "Perl's start-up (options, module paths, debugger)",
    "RUBY": "Ruby's start-up (options, library paths)",
    "NODE_": "Node's start-up (options such as --require, module paths)",
    "NPM_CONFIG_": "npm's configuration (scripts, registries, files it runs)",
    "PIP_": "pip's configuration (indexes and local archives it installs from)",
    "UV_": "uv's configuration (indexes, interpreters, local archives)",
    "PYTEST_": "pytest's options and plugins",
    "GIT_": "git's configuration, programs and repository location",
    "XDG_": "where tools read their configuration and data",
    "LUA_": "Lua's start-up code and module paths",
    "R_": "R's start-up files and library paths",
    "DOTNET_": ".NET's start-up hooks and dependency files",
    "CORECLR_": ".NET's profiler libraries",
    "COR_": ".NET's profiler libraries",
    "JAVA_": "the JVM's options (-javaagent loads code)",
    "_JAVA_": "the JVM's options (-javaagent loads code)",
    "JDK_": "the JVM's options (-javaagent loads code)",
    "GEM_": "RubyGems' paths",
    "BUNDLE_": "Bundler's configuration",
    "OPENSSL_": "OpenSSL's configuration and engines (shared libraries)",
    "GLIBC_": "glibc's tunables",
    "MALLOC_": "the allocator's hooks and tunables",
    "PHP_": "PHP's configuration files (auto_prepend_file runs code)",
}
"""Name prefixes of start-up variables and the mechanism each feeds."""

_NAMES = {
    "BASH_ENV": "the file bash sources before every non-interactive script",
    "ENV": "the file sh and bash (in POSIX mode) source at start",
    "ZDOTDIR": "where zsh reads its start-up files",
    "SHELLOPTS": "bash options (xtrace with PS4 runs commands)",
    "BASHOPTS": "bash options",
    "PROMPT_COMMAND": "a command bash runs before each prompt",
    "PS1": "bash's prompt (command substitutions run)",
    "PS4": "bash's trace prompt (command substitutions run)",
    "CDPATH": "where cd looks for relative directories",
    "GLOBIGNORE": "what bash's globs skip",
    "IFS": "how the shell splits words",
    "INPUTRC": "readline's start-up file",
    "GCONV_PATH": "glibc's character-set modules (shared libraries)",
    "LOCPATH": "glibc's locale files",
    "NLSPATH": "message catalogues",
    "HOSTALIASES": "host name aliases",
    "RESOLV_HOST_CONF": "the resolver's configuration",
    "TCLLIBPATH": "Tcl's packages",
    "PHPRC": "PHP's configuration file (auto_prepend_file runs code)",
    "CLASSPATH": "the JVM's classes",
    "PAGER": "the pager tools run", "MANPAGER": "the pager man runs", "LESSOPEN": "a command less runs",
    "LESSCLOSE": "a command less runs", "EDITOR": "the editor tools run", "VISUAL": "the editor tools run",
    "BROWSER": "the browser tools run",
    "HOME": "where tools read their configuration (~/.gitconfig, ~/.config/pip, ~/.local)",
    "TERMINFO": "terminal descriptions", "SSL_CERT_FILE": "the certificates TLS trusts",
    "SSL_CERT_DIR": "the certificates TLS trusts", "REQUESTS_CA_BUNDLE": "the certificates requests trusts",
    "CURL_CA_BUNDLE": "the certificates curl trusts", "CURL_HOME": "where curl reads its configuration",
    "WGETRC": "wget's configuration", "NETRC": "credentials and macros of network tools",
    "CONDARC": "conda's configuration", "PERLLIB": "Perl's module path",
    "SHELL": "the shell tools start", "CONFIG_SHELL": "the shell configure scripts run",
    "MAKEFLAGS": "make's options and variables (SHELL= runs a program)", "GNUMAKEFLAGS": "make's options",
    "MFLAGS": "make's options", "MAKEFILES": "makefiles make reads first",
    "CC": "the C compiler build tools run", "CXX": "the C++ compiler build tools run", "CPP": "the preprocessor",
    "LD": "the linker build tools run", "AR": "the archiver build tools run", "AS": "the assembler",
    "FC": "the Fortran compiler", "CGO_CFLAGS": "flags cgo passes to the compiler",
    "GOFLAGS": "the go tool's flags (-toolexec runs a program)", "GOROOT": "the Go toolchain",
    "GOPATH": "where go finds modules", "CARGO_HOME": "cargo's configuration and binaries",
    "RUSTC_WRAPPER": "a program cargo runs instead of rustc", "RUSTFLAGS": "rustc's flags (plugins, linkers)",
}
"""Start-up variables by full name and what each one decides."""

_HARMLESS = frozenset({
    "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONHASHSEED", "PYTHONUTF8",
    "PYTHONFAULTHANDLER", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONLEGACYWINDOWSSTDIO", "PYTHONCOERCECLOCALE",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT",
    "PIP_ROOT_USER_ACTION", "UV_NO_CACHE", "UV_OFFLINE", "UV_NO_PROGRESS", "NODE_ENV", "NODE_NO_WARNINGS",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT",
})
"""Variables under a start-up prefix that only change output, hashing, caching or identity."""

SEARCH_PATHS = {
    "PATH": "where commands are looked up",
    "PYTHONPATH": "where Python imports modules from",
}
"""Search paths allowed when every entry lies in the image's runtime (:data:`RUNTIME_ROOTS`)."""


def startup_variable(name: str, value: str) -> str | None:
    """What ``name`` decides when it makes a process load or run code from a place the agent could
    write (a phrase for a rejection), or None for an ordinary variable."""
    if name in SEARCH_PATHS:
        outside = [entry for entry in value.split(":") if not in_runtime(entry)]
        if not outside:
            return None
        shown = ", ".join(repr(e) for e in outside[:3])
        return f"{SEARCH_PATHS[name]}; its entries {shown} lie outside the image's runtime (/usr, /bin, /sbin, /lib)"
    if name in _HARMLESS:
        return None
    if name in _NAMES:
        return _NAMES[name]
    if "%%" in name or name.startswith("BASH_FUNC"):
        return _PREFIXES["BASH_FUNC_"]
    for prefix, what in _PREFIXES.items():
        if name.startswith(prefix):
            return what
    return None


def in_runtime(entry: str) -> bool:
    """True for an absolute, normalised path inside :data:`RUNTIME_ROOTS` (an empty or relative
    entry is looked up from the working directory, which the agent writes)."""
    if not entry.startswith("/") or re.search(r"(^|/)\.\.?(/|$)", entry):
        return False
    path = posixpath.normpath(entry)
    return any(path == root or path.startswith(root + "/") for root in RUNTIME_ROOTS)


def env_reasons(tables: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """(``[table] NAME``, what it decides) for each start-up variable set in ``tables``
    (table name -> its variables)."""
    found = []
    for table, values in tables.items():
        for name, value in values.items():
            what = startup_variable(str(name), str(value))
            if what:
                found.append((f"[{table}] {name}", what))
    return found
