"""The sealed verifier's denylist and the host-side reader of a container's writable layer
(no Docker needed: the layer is laid out by hand, as overlay2 stores it)."""

from __future__ import annotations

import os
import stat

import pytest

from aes.sandbox import limits
from aes.sandbox.carry import CarryError, SafeTree, carry_from_host
from aes.sandbox.seal import SealPolicy
from aes.sandbox.trial import AGENT_BROKE, INFRASTRUCTURE, Outcome
from aes.sandbox.verifier import cleared_env
from aes.tasks.config import TaskSpec

POLICY = SealPolicy({"PATH": "/app/.venv/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": "/app/.venv",
                     "UV_CACHE_DIR": "/opt/uv-cache"}, workdir="/app")


@pytest.mark.parametrize("path, is_dir", [
    ("/app/answer.txt", False), ("/app/src/solver.py", False), ("/data", True), ("/srv/www/index.html", False),
    ("/tmp/work/out.csv", False), ("/etc/nginx/nginx.conf", False), ("/etc/passwd", False),
    ("/home/u/project/main.c", False), ("/root/notes.txt", False), ("/app/test/__init__.py", False),
    ("/opt/tool/data.bin", False), ("/var/lib/postgresql/data/base", True),
])
def test_data_is_carried(path, is_dir):
    assert POLICY.deny_reason(path, is_dir=is_dir) is None


@pytest.mark.parametrize("path, is_dir, why", [
    ("/usr/bin/python3", False, "runtime"),
    ("/usr/local/lib/python3.12/site-packages/pytest/__init__.py", False, "runtime"),
    ("/bin/bash", False, "runtime"),
    ("/lib64/ld-linux-x86-64.so.2", False, "runtime"),
    ("/app/.venv/bin/pytest", False, "PATH"),
    ("/app/.venv/lib/python3.12/site-packages/x.py", False, "toolchain directory"),
    ("/opt/uv-cache/archive-v0/abc/pytest/__init__.py", False, "toolchain directory"),
    ("/opt/env/lib/python3.11/site-packages/evil.pth", False, "standard library"),
    ("/srv/venv/pyvenv.cfg", False, "interpreter start"),
    ("/tmp/sitecustomize.py", False, "interpreter start"),
    ("/app/lib/node_modules/jest/index.js", False, "installed code"),
    ("/etc/ld.so.preload", False, "configures"),
    ("/etc/alternatives/awk", False, "configures"),
    ("/etc/python3.11/sitecustomize.py", False, "configures"),
    ("/etc/apt/sources.list.d/evil.list", False, "configures"),
    ("/etc/pip.conf", False, "configures"),
    ("/var/lib/dpkg/status", False, "package-manager"),
    ("/root/.cache/uv/x", False, "home"),
    ("/home/u/.config/pip/pip.conf", False, "home"),
    ("/pyproject.toml", False, "top-level"),
    ("/conftest.py", False, "top-level"),
    ("/.git", True, "dot-entries"),
    ("/node_modules", True, "/node_modules"),
    ("/tests/test.sh", False, "verifier"),
    ("/logs/verifier/reward.txt", False, "verifier"),
    ("/app/json.py", False, "shadow"),
    ("/app/pytest.py", False, "shadow"),
    ("/app/pluggy/__init__.py", False, "shadow"),
    ("/app/evil-1.0.dist-info/entry_points.txt", False, "installed code"),
    ("/app/legacy.egg-info/entry_points.txt", False, "installed code"),
    ("/app/pytest_evil.py", False, "shadow"),
])
def test_what_the_verifier_runs_is_not_carried(path, is_dir, why):
    reason = POLICY.deny_reason(path, is_dir=is_dir)
    assert reason is not None and why.lower() in reason.lower(), reason


def test_modules_the_image_can_import_are_not_shadowed():
    policy = SealPolicy({}, shadow=frozenset({"numpy_extra_tool"}))
    assert policy.deny_reason("/app/numpy_extra_tool.py", is_dir=False)
    assert policy.deny_reason("/app/my_solution.py", is_dir=False) is None


def test_deletions_never_remove_the_runtime_or_users():
    for path in ("/usr/bin/python3", "/etc/passwd", "/etc", "/app", "/home/u", "/"):
        assert POLICY.deny_deletion(path), path  # /app holds the image's venv here
    assert POLICY.deny_deletion("/app/input.csv") is None
    assert POLICY.deny_deletion("/srv/old") is None


def test_image_start_up_hooks_are_cleared():
    env = {"PATH": "/usr/bin", "LD_PRELOAD": "/app/x.so", "LD_LIBRARY_PATH": "/app", "BASH_ENV": "/app/e.sh",
           "PYTHONPATH": "/app", "PYTHONSTARTUP": "/app/s.py", "NODE_OPTIONS": "--require /app/x.js", "LANG": "C",
           "BASH_FUNC_python3%%": "() { echo 1; }", "PYTHONPYCACHEPREFIX": "/app/pyc", "PYTEST_ADDOPTS": "-c /app/x",
           "LUA_INIT": "@/app/x.lua"}
    assert cleared_env(env) == {k: "" for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV",
                                                "PYTHONSTARTUP", "NODE_OPTIONS", "BASH_FUNC_python3%%",
                                                "PYTHONPYCACHEPREFIX", "PYTEST_ADDOPTS", "LUA_INIT")}


def test_loader_paths_inside_the_runtime_are_kept():
    env = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/app/lib:/usr/local/nvidia/lib64",
           "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /app/evil.so"}
    assert cleared_env(env) == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
                                "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}
    assert cleared_env({"LD_LIBRARY_PATH": "/usr/lib/../../app"}) == {"LD_LIBRARY_PATH": ""}
    assert cleared_env({"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}) == {}  # nothing to drop


@pytest.mark.parametrize("path", ["/opt/venv/pip.conf", "/app/h/.config/pip/pip.conf", "/srv/uv.toml",
                                  "/app/.npmrc", "/app/h/.gitconfig", "/data/.bashrc", "/app/pkg/.condarc"])
def test_tool_configuration_is_not_carried_wherever_it_lies(path):
    assert "configures" in POLICY.deny_reason(path, is_dir=False)


def test_the_images_homes_keep_their_tool_directories():
    policy = SealPolicy({"HOME": "/workspace"}, workdir="/workspace", homes=("/var/lib/postgresql", "/root"))
    for path in ("/var/lib/postgresql/.config/x", "/workspace/.cache/uv/x", "/workspace/.local/bin/pytest"):
        assert "home" in policy.deny_reason(path, is_dir=False), path
    for path in ("/workspace/.env", "/workspace/.git/HEAD", "/var/lib/postgresql/data/pg_hba.conf",
                 "/var/www/.htaccess"):
        assert policy.deny_reason(path, is_dir=False) is None, path


def test_interpreter_prefixes_the_tests_use_are_not_carried():
    from aes.sandbox.seal import prefix_candidates, tools_in

    script = "cd /tests\n/opt/tvenv/bin/pip install -q x && /srv/app/bin/server --check\n/app/.venv/bin/python t.py\n"
    tools = tools_in(script)
    assert tools == ("/opt/tvenv/bin/pip", "/srv/app/bin/server", "/app/.venv/bin/python")
    candidates = prefix_candidates(("/opt/conda/bin", "/usr/local/bin", "/app/bin", "/home/u/bin"), tools, "/app", ())
    assert candidates == ("/opt/conda", "/opt/tvenv", "/srv/app", "/app/.venv")
    policy = SealPolicy({}, workdir="/app", prefixes=("/opt/tvenv",))  # the verifier keeps those with an interpreter
    assert "install prefix" in policy.deny_reason("/opt/tvenv/lib/helper.sh", is_dir=False)
    assert policy.deny_reason("/srv/app/lib/parser.py", is_dir=False) is None  # a project's code: the agent's work
    assert policy.deny_deletion("/opt") and policy.deny_deletion("/opt/tvenv")


def test_the_images_service_scripts_are_not_replaced():
    assert POLICY.in_bin_dir("/etc/init.d/nginx") and POLICY.in_bin_dir("/etc/default/nginx")
    assert not POLICY.in_bin_dir("/etc/nginx/nginx.conf")


def test_git_configuration_loses_only_its_command_valued_keys():
    from aes.sandbox.gitconfig import parse, sanitize

    text = ('[core]\n\trepositoryformatversion = 0\n\tpager = /app/x\n\tfsmonitor = /app/x\n'
            '[filter "lfs"]\n\tclean = /app/x %f\n[user]\n\tname = A\n[alias]\n\tst = status\n\tx = "!sh /app/x"\n'
            '[diff "bin"] textconv = /app/x\n[remote "origin"]\n\turl = ext::sh -c /app/x\n'
            '\tfetch = +refs/heads/*:refs/remotes/origin/*\n[diff]\n\texternal = /app/x \\\n  --more\n'
            '[include]\n\tpath = /app/more\n[includeIf "gitdir:/app/"]\n\tpath = /app/more\n[Core]\n\tEditor = /app/x\n'
            '[log]\n\tshowSignature = true\n[gpg]\n\tprogram = /app/x\n[branch "main"]\n\tremote = origin\n'
            '[submodule "m"]\n\tupdate = !/app/x\n\turl = ../m\n[merge "ours"]\n\tdriver = /app/x\n'
            '[user][filter "x"]clean = /app/x\n[url "ext::sh -c /app/x "]\n\tinsteadOf = https://\n')
    out, dropped = sanitize(text)
    assert "/app/x" not in out and "/app/more" not in out and "--more" not in out
    kept = {(s, sub, k): v for s, sub, k, v in parse(out)[0]}
    assert kept == {("core", None, "repositoryformatversion"): "0", ("user", None, "name"): "A",
                    ("alias", None, "st"): "status", ("remote", "origin", "fetch"): "+refs/heads/*:refs/remotes/origin/*",
                    ("branch", "main", "remote"): "origin", ("submodule", "m", "url"): "../m"}
    assert len(dropped) == 16, dropped
    assert "filter.x.clean" in dropped  # two sections on one line: git reads the second one's key


def test_git_configuration_is_read_as_git_reads_it(tmp_path):
    """The parser against git itself on hand-written layouts and random text: the same keys and
    values, or an error where git reports one; the canonical text reads back the same."""
    import random
    import shutil
    import subprocess

    from aes.sandbox.gitconfig import parse, sanitize

    if shutil.which("git") is None:
        pytest.skip("git is not installed on this machine")
    cases = ['[user][filter "x"]clean = /app/f\n', '[core] bare = false [filter "x"] clean = y\n',
             '[filter.x]\n clean = y\n', '[Filter "X"]\n\tClean = y\n', '[a.b "c"]\n k = v\n',
             '[a "b\\"c"]\n k = v\n', '[a]\n k = "quoted # x" # comment\n', '[a]\n k = v \\\n  continued\n',
             '[a]\n k = "a\\tb\\nc\\\\d"\n', '[a]\n k = bad\\escape\n', '[a]\n k\n k2 = \n k3=x;c\n',
             '\ufeff[a]\nk=v\n', '[a]\r\nk=v\r\n', '[a]\nk = "unterminated\n', 'k = v\n', '[a]\n k = x  y\t z  \n',
             '[a]\n k = "" x\n', '[a]\n k = x\\', '[a]k=v', '[a "x"] [b] k = v\n', '[ a ]\nk=v\n', '[a.]\n k=w\n']
    rng = random.Random(1)
    alphabet = ['[', ']', '"', '\\', '\n', ' ', '\t', '=', '#', ';', 'a', 'b', '.', 'k', 'x', '\r', '-', '1']
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(250)]
    cases += ["[s]\n" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(250)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}

    def git_list(text: str) -> list[str] | None:
        (tmp_path / "config").write_text(text)
        run = subprocess.run(["git", "config", "--file", str(tmp_path / "config"), "--no-includes", "--list", "-z"],
                             capture_output=True, text=True, env=env)
        return [x for x in run.stdout.split("\0") if x] if run.returncode == 0 else None

    def ours(entries) -> list[str]:
        return [(f"{s}.{sub + '.' if sub is not None else ''}{k}" if s else k) + ("" if v is None else "\n" + v)
                for s, sub, k, v in entries]

    for text in cases:
        entries, error = parse(text)
        theirs = git_list(text)
        assert (theirs is None) == (error is not None), (text, theirs, error)
        if theirs is not None:
            assert ours(entries) == theirs, text
        out, _ = sanitize(text)
        assert git_list(out) == ours([e for e in parse(out)[0]]), text


def test_a_carried_repository_config_is_sanitized(tmp_path):
    """In every layout git reads a configuration from: a git dir (HEAD a file or a symlink), a
    worktree's git dir (commondir), a shared common dir (objects and refs, no HEAD), a ``*.git``
    dir; a plain file named config elsewhere is data."""
    import tarfile

    upper, merged = tmp_path / "upper", tmp_path / "merged"
    evil = '[core]\n\tbare = false\n[filter "x"]\n\tclean = /app/x\n'
    for base in (upper, merged):
        for repo in ("app/.git", "app/store", "app/wt", "app/common", "srv/bare.git"):
            (base / repo).mkdir(parents=True)
            (base / repo / "config").write_text(evil)
        (base / "app" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        os.symlink("refs/heads/main", base / "app" / "store" / "HEAD")
        (base / "app" / "wt" / "commondir").write_text("../common\n")
        for sub in ("objects", "refs"):
            (base / "app" / "common" / sub).mkdir()
        (base / "app" / "config").write_text('[filter "x"]\n\tclean = kept: not a repository\n')
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 1 << 20)
    with tarfile.open(fileobj=carry.archive) as tar:
        for repo in ("app/.git", "app/store", "app/wt", "app/common", "srv/bare.git"):
            text = tar.extractfile(f"{repo}/config").read().decode()
            assert "bare" in text and "clean" not in text, repo
        plain = tar.extractfile("app/config").read().decode()
    assert "kept" in plain
    assert carry.sanitized["/app/.git/config"] == ["filter.x.clean"] and len(carry.sanitized) == 5
    assert "carried without filter.x.clean" in carry.summary()


def test_outcomes_are_partitioned():
    rewarded = {Outcome.OK, Outcome.AGENT_TIMEOUT}
    assert not AGENT_BROKE & INFRASTRUCTURE and not (AGENT_BROKE | INFRASTRUCTURE) & rewarded
    assert set(Outcome) == rewarded | AGENT_BROKE | INFRASTRUCTURE | {Outcome.BUILD_FAILED}


class _Task:
    def __init__(self, **spec):
        self.spec = TaskSpec(**spec)


def test_declared_limits_are_bounded(cfg):
    task = _Task(build_timeout_sec=1e300, agent_timeout_sec=1e9, verifier_timeout_sec=5.0, storage_mb=10**9)
    assert limits.build_timeout(cfg.sandbox, task) == cfg.sandbox.max_build_timeout_sec
    assert limits.agent_timeout(cfg.sandbox, task) == cfg.sandbox.max_agent_timeout_sec
    assert limits.verifier_timeout(cfg.sandbox, task) == 5.0
    assert limits.storage_mb(cfg.sandbox, task) == cfg.sandbox.max_storage_mb
    notes = limits.clamp_notes(cfg.sandbox, task)
    assert len(notes) == 3 and "sandbox.max_build_timeout_sec" in notes[0]


# -- the host-side reader ---------------------------------------------------------------------------
def test_safe_tree_never_leaves_its_root(tmp_path):
    root = tmp_path / "merged"
    (root / "app").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("host secret")
    os.symlink("../../outside.txt", root / "app" / "up")
    os.symlink(str(tmp_path / "outside.txt"), root / "app" / "abs")
    os.symlink("/app/loop", root / "app" / "loop")
    (root / "app" / "real.txt").write_text("data")
    os.symlink("real.txt", root / "app" / "rel")
    tree = SafeTree(str(root))
    assert tree.resolve("/app/up") is None  # clamped at the root: /outside.txt does not exist there
    assert tree.resolve("/app/abs") is None
    assert tree.resolve("/app/loop") is None
    assert tree.resolve("/app/rel") == "/app/real.txt"
    assert tree.open_regular("/app/rel") is None  # never follows a link when opening
    handle, _ = tree.open_regular("/app/real.txt")
    assert handle.read() == b"data"


def _layer(tmp_path):
    upper, merged = tmp_path / "upper", tmp_path / "merged"
    for base in (upper, merged):
        (base / "app").mkdir(parents=True)
        (base / "usr" / "bin").mkdir(parents=True)
    for base in (upper, merged):
        (base / "app" / "answer.txt").write_text("42\n")
        (base / "usr" / "bin" / "python3").write_text("#!/bin/sh\necho forged\n")
        os.symlink("/tests/expected.txt", base / "app" / "to_tests")
        os.symlink("answer.txt", base / "app" / "alias")
        os.mkfifo(base / "app" / "pipe")
        (base / "app" / "setuid").write_text("x")
        os.chmod(base / "app" / "setuid", 0o4755)
    return upper, merged


def test_layer_carries_data_and_copies_links(tmp_path):
    import tarfile

    upper, merged = _layer(tmp_path)
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 1 << 20)
    with tarfile.open(fileobj=carry.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile(members["app/alias"]).read() == b"42\n"  # a copy, not a link
        assert all(m.isfile() or m.isdir() for m in members.values())
        assert not members["app/setuid"].mode & 0o6000
    assert "usr/bin/python3" not in members and "app/to_tests" not in members and "app/pipe" not in members
    assert carry.skipped and carry.files == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts are character devices: mknod needs root")
def test_layer_deletions_are_carried_within_the_policy(tmp_path):
    upper, merged = _layer(tmp_path)
    (upper / "etc").mkdir()
    for name in ("app/old.csv", "etc/passwd"):
        os.mknod(upper / name, stat.S_IFCHR | 0o000, os.makedev(0, 0))
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 1 << 20)
    assert carry.deletions == ["/app/old.csv"]


def test_layer_limits_end_the_carry(tmp_path):
    upper, merged = _layer(tmp_path)
    with pytest.raises(CarryError, match="max_carry_entries"):
        carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 2, 1 << 20)
    with pytest.raises(CarryError, match="storage"):
        carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 4)


def test_the_images_own_tools_in_bin_dirs_are_not_carried(tmp_path):
    upper, merged = tmp_path / "upper", tmp_path / "merged"
    for base in (upper, merged):
        (base / "opt" / "venv" / "bin").mkdir(parents=True)
        (base / "opt" / "venv" / "bin" / "python").write_text("forged")
        (base / "opt" / "venv" / "bin" / "mytool").write_text("new")
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: p.endswith("/python"), 1000, 1 << 20)
    import tarfile

    with tarfile.open(fileobj=carry.archive) as tar:
        names = tar.getnames()
    assert "opt/venv/bin/mytool" in names and "opt/venv/bin/python" not in names


class _FreezerAPI:
    """The engine's answers to POST /containers/ID/pause and /kill as dockerd 20.10 gives them when
    runc's freezer gives up ("unable to freeze")."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, []

    def pause(self, cid):
        import docker

        self.calls.append("pause")
        if self.failures:
            self.failures -= 1
            raise docker.errors.APIError(f"500 Server Error: Cannot pause container {cid}: OCI runtime pause "
                                         f"failed: unable to freeze: unknown")

    def kill(self, cid):
        self.calls.append("kill")


@pytest.mark.parametrize("failures, frozen, calls", [
    (0, True, ["pause"]),
    (2, True, ["pause"] * 3),
    (9, False, ["pause"] * 3 + ["kill"]),
])
def test_a_container_the_freezer_cannot_stop_is_frozen_on_a_retry_or_killed(failures, frozen, calls, monkeypatch):
    """The agent's turn must end either way: a failed freeze is not an infrastructure loss (which
    would drop the attempt unscored: a way to dodge a 0), and a killed container is read through
    the API (host_layer is only used on a frozen one)."""
    from types import SimpleNamespace

    from aes.sandbox import container as container_module

    monkeypatch.setattr(container_module.time, "sleep", lambda s: None)
    api = _FreezerAPI(failures)
    box = container_module.Container(SimpleNamespace(api=api), SimpleNamespace(id="c" * 64), 1024)
    assert box.pause(retries=2) is frozen
    assert api.calls == calls


def test_deletions_count_against_the_carry_limit(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("whiteouts are character devices: mknod needs root")
    upper, merged = tmp_path / "upper", tmp_path / "merged"
    (upper / "app").mkdir(parents=True)
    (merged / "app").mkdir(parents=True)
    for i in range(5):
        os.mknod(upper / "app" / f"old{i}", stat.S_IFCHR | 0o000, os.makedev(0, 0))
    with pytest.raises(CarryError, match="max_carry_entries"):
        carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 4, 1 << 20)
    assert len(carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 10, 1 << 20).deletions) == 5


def test_packages_the_tests_install_are_not_shadowed():
    from aes.sandbox.seal import installed_by_tests

    script = ("uvx --with pytest==8.3.3 --with=pytest-json-ctrf==0.3 pytest /tests\n"
              "pip install -q requests-mock lxml && pip3 install --no-cache-dir -r /tests/req.txt hypothesis\n")
    names = installed_by_tests(script)
    assert names == {"pytest", "pytest_json_ctrf", "requests_mock", "lxml", "hypothesis"}
    policy = SealPolicy({}, shadow=names)
    assert policy.deny_reason("/app/requests_mock.py", is_dir=False)
    assert policy.deny_reason("/app/lxml/__init__.py", is_dir=False)
    assert policy.deny_reason("/app/report.py", is_dir=False) is None


def test_scratch_space_is_carried_writable_by_the_verifiers_user(tmp_path):
    import tarfile

    upper, merged = tmp_path / "upper", tmp_path / "merged"
    for base in (upper, merged):
        (base / "tmp" / "work").mkdir(parents=True)
        (base / "tmp" / "expected.txt").write_text("wrong")
        os.chmod(base / "tmp" / "expected.txt", 0o444)
        (base / "app").mkdir()
        (base / "app" / "ro.txt").write_text("kept read-only")
        os.chmod(base / "app" / "ro.txt", 0o444)
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 1 << 20,
                            scratch_owner=(1000, 1000))
    with tarfile.open(fileobj=carry.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    scratch = members["tmp/expected.txt"]
    assert (scratch.uid, scratch.gid) == (1000, 1000) and scratch.mode & 0o600 == 0o600
    assert members["tmp/work"].mode & 0o700 == 0o700 and members["tmp/work"].uid == 1000
    assert members["app/ro.txt"].mode & 0o777 == 0o444  # outside scratch space, modes are the work


def test_links_to_data_directories_stay_links(tmp_path):
    import tarfile

    upper, merged = tmp_path / "upper", tmp_path / "merged"
    for base in (upper, merged):
        (base / "app" / "releases" / "v2").mkdir(parents=True)
        (base / "tmp" / "w").mkdir(parents=True)
        os.symlink("releases/v2", base / "app" / "current")
        os.symlink("/tmp/w", base / "app" / "scratch")
        os.symlink("/usr", base / "app" / "sys")
        os.symlink("/", base / "app" / "root")
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 1000, 1 << 20)
    with tarfile.open(fileobj=carry.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["app/current"].issym() and members["app/current"].linkname == "releases/v2"
    for dropped in ("app/scratch", "app/sys", "app/root"):
        assert dropped not in members, dropped
    assert carry.links == 1 and "1 directory link(s)" in carry.summary()


# -- issue 23 classes 1-4: what loads code from the agent's data --------------------------------------
@pytest.mark.parametrize("path, why", [
    ("/app/usercustomize/__init__.py", "shadow"),  # a start-up hook as a package (its name is reserved)
    ("/app/pytest/__init__.pyc", "bytecode"),  # a shadowing package in bytecode only
    ("/app/x.pyc", "bytecode"), ("/app/__pycache__/solver.cpython-312.pyc", "bytecode"),
    ("/app/pytest.cpython-311-x86_64-linux-gnu.so", "shadow"),
    ("/app/EVIL-1.0.DIST-INFO/entry_points.txt", "installed code"),  # the metadata finder ignores case
    ("/app/Evil-1.0.Egg-Info/entry_points.txt", "installed code"),
    ("/app/evil.egg/EGG-INFO/entry_points.txt", "installed code"),
    ("/etc/login.defs", "configures"), ("/etc/default/locale", "configures"), ("/etc/skel/.bashrc", "configures"),
    ("/app/h/.ssh/config", "home"),
])
def test_loaders_see_through_spellings_and_layouts(path, why):
    policy = SealPolicy({}, homes=("/app/h",), shadow=frozenset({"usercustomize", "pytest"}))
    reason = policy.deny_reason(path, is_dir=False)
    assert reason is not None and why in reason.lower(), reason


def test_module_names_follow_the_import_system():
    from aes.sandbox.seal import module_name

    assert module_name("/app/pkg/__init__.cpython-311-x86_64-linux-gnu.so") == "pkg"
    assert module_name("/app/json.py") == "json" and module_name("/app/pkg/__init__.pyc") == "pkg"
    assert module_name("/app/data.csv") is None and module_name("/app/my-pkg/__init__.py") is None


def test_relative_path_entries_are_dropped():
    from aes.sandbox.verifier import absolute_path

    assert absolute_path(":/usr/bin:bin:.:/bin::node_modules/.bin") == "/usr/bin:/bin"
    assert cleared_env({"PATH": "bin:/usr/bin"}) == {"PATH": "/usr/bin"}
    assert "PATH" not in cleared_env({"PATH": "/usr/local/bin:/usr/bin"})


def test_the_python_start_up_probe_is_read():
    from aes.sandbox.verifier import startup_facts

    output = ("AES-PATH /app\nAES-PATH /usr/lib/python3.11\n"
              "# trying /app/sitecustomize.py\n# trying /usr/lib/python3.11/apport_python_hook.so\n"
              "# trying /usr/lib/python3.11/encodings/aliases.py\n# trying /usr/lib/python3.11/site_local/__init__.py\n")
    facts = startup_facts(output)
    assert facts.modules == {"sitecustomize", "apport_python_hook", "site_local"}


def test_the_account_database_keeps_the_pristine_ids_and_programs():
    from aes.sandbox.accounts import homes, merge_passwd

    pristine = "root:x:0:0:root:/root:/bin/bash\ntester:x:1000:1000::/home/tester:/bin/bash\n"
    agent = ("root:x:0:0:root:/app/h:/app/sh\ntester:x:0:0:Tess:/srv/t:/usr/bin/zsh\n"
             "tester:x:1000:1000::/home/tester:/app/sh\ndeploy:x:1001:1001::/srv/deploy:/bin/sh\n"
             "evil:x:1002:1002::/home/evil:/app/sh\n+::::::\nbroken:x:1003\n")
    safe = {"/bin/bash", "/bin/sh", "/usr/bin/zsh"}.__contains__
    text, notes = merge_passwd(pristine, agent, safe)
    assert text.splitlines() == ["root:x:0:0:root:/app/h:/bin/bash",  # the home may move, the shell not to /app
                                 "tester:x:1000:1000:Tess:/srv/t:/usr/bin/zsh",  # ids kept, an image shell allowed
                                 "deploy:x:1001:1001::/srv/deploy:/bin/sh"]
    assert len(notes) == 3 and homes(agent) == ("/app/h", "/srv/t", "/srv/deploy", "/home/evil")
    assert merge_passwd(pristine, "", safe)[0] == "root:x:0:0:root:/root:/bin/bash\n"  # root cannot go


def test_the_audit_sorts_what_it_sees():
    from aes.sandbox.audit import AuditRecord, Classifier, Load, code_load, judge, loader_path

    assert code_load("/app/m.py", "/usr/bin/python3.11", b"") and code_load("/app/lib.so.1", "/usr/bin/cat", b"")
    assert code_load("/app/run", "/bin/bash", b"#!") and not code_load("/app/run", "/usr/bin/git", b"#!")
    assert not code_load("/app/m.py", "/usr/bin/cat", b"") and not code_load("/app/answer.txt", "/usr/bin/python3", b"")
    assert code_load("/app/m.py", "?", b"")  # the opener had gone: as any interpreter would
    assert loader_path("/app/X-1.DIST-INFO/entry_points.txt") and loader_path("/app/a.pth")
    assert loader_path("/app/a.egg/EGG-INFO/entry_points.txt") and not loader_path("/app/data/info.txt")
    classify = Classifier(frozenset({"site_local"}), frozenset({"json"}))
    assert "start-up" in classify.startup("/app/site_local.py", "/usr/bin/python3")
    assert "shadows" in classify.startup("/app/json/__init__.py", "/usr/bin/python3")
    assert classify.startup("/app/site_local.py", "/usr/bin/cat") is None
    code = AuditRecord(watched=True, code=[Load("/app/org/__init__.py", "loaded as code", "/usr/bin/python3")])
    data = AuditRecord(watched=True)
    assert judge(code, data) and not judge(code, code) and not judge(data, data)
    assert not judge(code, AuditRecord(watched=False))  # nothing to compare with
    touched = AuditRecord(watched=True, startup=[Load("/app/a.pth", "start-up or loader path", "python3", "x")])
    assert judge(touched, touched)  # a start-up path is never the work, whatever the reference did
    assert AuditRecord.from_dict(code.to_dict()) == code


def test_the_audit_names_what_a_process_runs_from_the_carried_files(tmp_path):
    """The watch on this host's file system: a program run, a module imported, a script sourced and
    a data file read, each named with the program that opened it (processes that end at once too)."""
    import subprocess
    import sys

    from aes.sandbox.audit import Watch

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(tmp_path / "run.sh", 0o755)
    (tmp_path / "answer.txt").write_text("42\n")
    (tmp_path / "untouched.py").write_text("")
    carried = frozenset(f"/{p}" for p in ("pkg/mod.py", "run.sh", "answer.txt", "untouched.py"))
    with Watch(str(tmp_path), carried) as watch:
        if not watch.record.watched:
            pytest.skip(f"no fanotify here: {watch.record.note}")
        subprocess.run([str(tmp_path / "run.sh")], check=True, capture_output=True)
        subprocess.run(["cat", str(tmp_path / "answer.txt")], check=True, capture_output=True)
        subprocess.run([sys.executable, "-c", "import mod"], cwd=tmp_path / "pkg", check=True, env={"PATH": "/usr/bin"})
    record = watch.record
    how = {(load.path, load.how) for load in record.code}
    # the tree is watched at its own paths: the fd's path is the host path
    assert (f"{tmp_path}/run.sh", "executed") in how and (f"{tmp_path}/pkg/mod.py", "loaded as code") in how
    assert not any(load.path.endswith("answer.txt") for load in record.code)
    assert record.opened >= 3 and record.seconds > 0
    assert all(load.program != "?" for load in record.code)


def test_the_carry_is_bounded_in_time_and_in_paths_looked_at(tmp_path):
    """Entries not carried count too (four times the entry limit), and the clock is read as it goes:
    a tree of many denied paths, or a slow read, ends with a CarryError, not an endless walk."""
    upper, merged = tmp_path / "upper", tmp_path / "merged"
    for base in (upper, merged):
        (base / "usr" / "lib" / "many").mkdir(parents=True)
        (base / "app").mkdir()
        for i in range(500):
            (base / "usr" / "lib" / "many" / f"f{i}").write_text("x")
        for i in range(50):
            (base / "app" / f"g{i}").write_text("y")
    with pytest.raises(CarryError, match=r"counting those not carried"):
        carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 100, 1 << 20)
    with pytest.raises(CarryError, match="max_carry_sec"):
        carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 10000, 1 << 20, max_seconds=0.0)
    carry = carry_from_host(str(upper), str(merged), SealPolicy({}), lambda p: False, 10000, 1 << 20)
    assert carry.files == 50 and len(carry.paths) == 50 and carry.skipped


def test_descendants_of_fetched_paths_are_found_by_their_ancestors():
    from aes.sandbox.carry_api import _below

    done = {"/app/many", "/srv"}
    assert _below("/app/many/x/y", done) and _below("/srv/a", done)
    assert not _below("/app/many", done) and not _below("/app/manyx/y", done) and not _below("/", done)


def test_tampered_attempts_are_counted_in_the_report(tmp_path):
    import json

    from aes.paths import RunPaths
    from aes.report.html import render
    from aes.report.rundata import RunData
    from aes.rollout.index import AttemptRecord, IndexRow

    records = [AttemptRecord("e1", "s", k, 0.0, "tampered", failure="trial tampered") for k in range(2)]
    records.append(AttemptRecord("e1", "s", 2, 1.0, "ok"))
    index = RunPaths(tmp_path).index
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps(IndexRow.from_attempts("e1", "t", "s", records).to_dict()) + "\n")
    data = RunData(tmp_path)
    assert data.tampered == 2 and "2 solver attempts ended tampered" in render(data, "run")


def test_the_reference_audit_is_kept_and_an_infrastructure_loss_is_not(tmp_path):
    from types import SimpleNamespace

    from aes.errors import InfrastructureError
    from aes.sandbox.audit import AuditRecord, Load
    from aes.sandbox.trial import INFRASTRUCTURE, Outcome
    from aes.sandbox.verifier import INFRASTRUCTURE_OUTCOMES, SealedVerifier

    assert set(INFRASTRUCTURE_OUTCOMES) == {o.value for o in INFRASTRUCTURE}
    task = SimpleNamespace(path=tmp_path, name="t")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.sh").write_text("true\n")
    verifier = SealedVerifier(SimpleNamespace(cfg=None), cfg=SimpleNamespace())
    code = AuditRecord(watched=True, code=[Load("/app/x.py", "loaded as code", "/usr/bin/python3")])
    runs = []

    def reference(outcome, audit):
        def run():
            runs.append(outcome)
            return SimpleNamespace(outcome=outcome, reward=None if outcome in INFRASTRUCTURE else 1.0, detail="",
                                   agent_info={"audit": audit.to_dict()} if audit else {})
        return run

    with pytest.raises(InfrastructureError):
        verifier.tampering(task, "img", code, False, reference(Outcome.SANDBOX_ERROR, None))
    assert verifier.tampering(task, "img", code, False, reference(Outcome.OK, AuditRecord(watched=True)))
    assert verifier.tampering(task, "img", code, False, reference(Outcome.OK, code))  # kept: not run again
    assert runs == [Outcome.SANDBOX_ERROR, Outcome.OK]
    assert not verifier.tampering(task, "other", code, True, reference(Outcome.OK, None))  # the reference itself
    assert not verifier.tampering(task, "other", code, False, reference(Outcome.OK, None))  # judged by its own record


def test_a_file_that_shrinks_while_the_engine_archives_it_is_a_value_error():
    """What dockerd sends for a file truncated while it streamed it (the header's size, fewer bytes):
    the reward file of a verifier where a process still rewrites it is a bad reward file, not an
    exception out of the trial."""
    import io
    import tarfile
    from types import SimpleNamespace

    from aes.sandbox.container import Container

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("reward.txt")
        info.size = 600
        tar.addfile(info, io.BytesIO(b"1" * 600))
    truncated = buf.getvalue()[:512 + 100]
    api = SimpleNamespace(get_archive=lambda cid, path: ([truncated], {"size": 600, "mode": 0o644}))
    box = Container(SimpleNamespace(api=api), SimpleNamespace(id="c" * 64), 1024)
    with pytest.raises(ValueError, match="changed while it was read"):
        box.read_file("/logs/verifier/reward.txt")
