"""Static admission checks: leaks of tests/solution, host power, unsupported Dockerfiles, sizes."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import stat
import tarfile

import pytest

from aes.tasks import check_task, check_task_with_config, load_task
from aes.tasks.static import check_dockerfile, dockerfile_instructions
from tests.conftest import make_task


def codes(path) -> list[str]:
    return [r.code for r in check_task(load_task(path))]


def test_clean_task_passes(tmp_path):
    assert codes(make_task(tmp_path)) == []


def test_instructions_join_continuations_and_skip_comments():
    text = "FROM x\n# c\nRUN a \\\n  # inner comment\n  && b\n"
    assert dockerfile_instructions(text) == [("FROM", "x", 1), ("RUN", "a && b", 3)]


def test_heredoc_is_rejected():
    reasons = check_dockerfile("FROM x\nRUN cat <<'EOF' > /f\nhi\nEOF\n")
    assert [r.code for r in reasons] == ["static.dockerfile_heredoc"]


def test_missing_from_is_rejected():
    assert [r.code for r in check_dockerfile("RUN true\n")] == ["static.dockerfile_no_from"]


def test_copying_solution_or_tests_is_rejected():
    for line in ("COPY solution/ /s", "ADD tests /t", "COPY --chown=1 ./solution/solve.sh /x"):
        assert [r.code for r in check_dockerfile(f"FROM x\n{line}\n")] == ["static.secret_in_image"]
    assert check_dockerfile("FROM x\nCOPY data/ /app/tests_input/\n") == []


def test_copy_of_solution_in_context_is_rejected(tmp_path):
    solve = "python3 -c 'print(42)' > /app/answer.txt\n"
    path = make_task(tmp_path, solve=solve, files={"environment/helper.sh": "#!/bin/bash\n" + solve})
    assert codes(path) == ["static.secret_in_image"]


def test_host_privileges_in_dockerfile_are_rejected():
    reasons = check_dockerfile("FROM x\nRUN --network=host curl y\nRUN ls /var/run/docker.sock\n")
    assert [r.code for r in reasons] == ["static.dangerous_option"] * 2


def test_dangerous_compose_options_each_have_a_reason(tmp_path):
    compose = ("services:\n  main:\n    build: .\n    privileged: true\n    network_mode: host\n"
               "    pid: host\n    devices: ['/dev/kvm']\n    volumes: ['/:/host', 'named:/data']\n")
    path = make_task(tmp_path, files={"environment/docker-compose.yaml": compose})
    messages = [str(r) for r in check_task(load_task(path))]
    assert len(messages) == 5 and all(m.startswith("static.dangerous_option") for m in messages)
    assert any("'/'" in m for m in messages) and not any("named" in m for m in messages)


def test_benign_compose_is_unsupported_not_dangerous(tmp_path):
    path = make_task(tmp_path, files={"environment/docker-compose.yaml": "services:\n  main:\n    build: .\n"})
    assert codes(path) == ["static.compose_unsupported"]


def test_symlink_out_of_the_task_is_rejected(tmp_path):
    path = make_task(tmp_path)
    os.symlink("/etc/shadow", path / "environment" / "shadow")
    assert codes(path) == ["static.symlink_escape"]


def test_dangerous_task_toml_keys_are_rejected(tmp_path):
    path = make_task(tmp_path, toml="[environment]\nprivileged = true\n")
    assert codes(path) == ["static.dangerous_option"]


# -- leaks: what gives the answer away, not every shared byte ------------------------------

CSV = "id,value\n1,10\n2,20\n3,30\n"


def test_input_reused_by_the_tests_is_not_a_leak(tmp_path):
    path = make_task(tmp_path, files={"environment/input.csv": CSV, "tests/input.csv": CSV,
                                      "environment/data/more.txt": CSV * 2, "tests/fixtures/more.txt": CSV * 2})
    assert codes(path) == []


def test_copy_of_expected_output_is_a_leak(tmp_path):
    path = make_task(tmp_path, files={"environment/out.csv": CSV, "tests/expected_output.csv": CSV})
    [reason] = check_task(load_task(path))
    assert reason.code == "static.secret_in_image"
    assert "environment/out.csv is a copy of tests/expected_output.csv" in reason.message
    assert "expected results" in reason.message


@pytest.mark.parametrize("name", ["answer.txt", "answers.json", "golden/out.txt", "gold.csv", "reference_out.txt",
                                  "oracle.txt", "ground_truth.csv", "my_solution.txt", "Expected/result.csv"])
def test_every_expected_result_name_is_a_secret(tmp_path, name):
    path = make_task(tmp_path, files={"environment/x.dat": CSV, f"tests/{name}": CSV})
    assert codes(path) == ["static.secret_in_image"]


@pytest.mark.parametrize("name", ["test_outputs.py", "checks_test.py", "conftest.py", "helpers.py", "run.sh", "test.sh"])
def test_copy_of_test_code_is_a_leak(tmp_path, name):
    code = "import json\nassert json.load(open('/app/out.json')) == {'a': 1}\n"
    path = make_task(tmp_path, files={"environment/tool": code, f"tests/{name}": code})
    [reason] = check_task(load_task(path))
    assert reason.code == "static.secret_in_image" and f"tests/{name}" in reason.message
    assert "verifier's code" in reason.message


def test_public_tests_the_verifier_keeps_a_copy_of_are_not_a_leak(tmp_path):
    code = "from pkg import f\n\ndef test_f():\n    assert f() == 1\n"
    path = make_task(tmp_path, files={"environment/repo/tests/test_f.py": code, "tests/public/test_f.py": code})
    assert codes(path) == []
    path = make_task(tmp_path / "private", files={"environment/repo/tests/test_f.py": code, "tests/test_f.py": code})
    assert codes(path) == ["static.secret_in_image"]


def test_script_without_a_suffix_is_test_code_by_its_shebang(tmp_path):
    script = "#!/usr/bin/env python3\nprint('checking')\n"
    path = make_task(tmp_path, files={"environment/check": script, "tests/check": script})
    assert codes(path) == ["static.secret_in_image"]


def test_anything_the_solution_ships_is_a_leak(tmp_path):
    data = "precomputed answer table\n" * 4
    path = make_task(tmp_path, files={"environment/table.txt": data, "solution/table.txt": data})
    [reason] = check_task(load_task(path))
    assert reason.code == "static.secret_in_image"
    assert "solution/table.txt" in reason.message and "reference solution" in reason.message


def test_tiny_files_are_never_leaks(tmp_path):
    files = {"environment/pkg/__init__.py": "", "tests/__init__.py": "", "environment/v": "# tiny\n",
             "tests/conftest.py": "# tiny\n", "solution/n.txt": "# tiny\n"}
    assert codes(make_task(tmp_path, files=files)) == []


def test_large_copies_are_compared_by_size_then_hashed(tmp_path):
    path = make_task(tmp_path)
    for rel in ("environment/big.bin", "tests/expected.bin", "tests/other_expected.bin"):
        with open(path / rel, "wb") as fh:  # sparse: 9 MiB, past the old 8 MiB hash cap
            fh.truncate(9 << 20)
    with open(path / "tests" / "other_expected.bin", "r+b") as fh:
        fh.seek(5 << 20)
        fh.write(b"different")  # same size, other bytes: hashed and found different
    reasons = check_task(load_task(path))
    assert [r.code for r in reasons] == ["static.secret_in_image"]
    assert "tests/expected.bin" in reasons[0].message


# -- sizes and counts, from lstat, never reading the files ---------------------------------

def _sparse(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)


def test_oversized_tests_and_solution_are_rejected(tmp_path):
    path = make_task(tmp_path)
    _sparse(path / "tests" / "data" / "big.bin", 65 << 20)
    _sparse(path / "solution" / "model.bin", 65 << 20)
    reasons = check_task(load_task(path))
    assert sorted(r.code for r in reasons) == ["static.solution_too_large", "static.tests_too_large"]
    message = next(r.message for r in reasons if r.code == "static.tests_too_large")
    assert "65 MiB" in message and "64 MiB" in message and "sandbox.max_tests_mb" in message


def test_tests_limit_can_be_passed(tmp_path):
    path = make_task(tmp_path)
    _sparse(path / "tests" / "big.bin", 2 << 20)
    task = load_task(path)
    assert [r.code for r in check_task(task, max_tests_mb=1)] == ["static.tests_too_large"]
    assert check_task(task, 256, max_tests_mb=3) == []


def test_check_task_with_config_takes_every_limit(tmp_path, cfg):
    path = make_task(tmp_path, instruction="word " * 400)
    _sparse(path / "solution" / "big.bin", 2 << 20)
    _sparse(path / "environment" / "blob.bin", 3 << 20)
    task = load_task(path)
    assert check_task_with_config(task, cfg.sandbox) == []
    tight = dataclasses.replace(cfg.sandbox, max_tests_mb=1, max_context_mb=1, max_instruction_kb=1)
    assert sorted(r.code for r in check_task_with_config(task, tight)) == [
        "static.context_too_large", "static.layout.instruction_too_large", "static.solution_too_large"]


def test_walk_stops_at_the_entry_limit(tmp_path):
    path = make_task(tmp_path)
    for i in range(60):
        (path / "tests" / f"case{i}.txt").write_text(f"case {i}\n")
    task = load_task(path)
    reasons = check_task(task, max_entries=50)
    assert [r.code for r in reasons] == ["static.too_many_entries"]
    assert "tests/" in reasons[0].message and "50" in reasons[0].message
    assert check_task(task, max_entries=100) == []


def test_entries_outside_the_three_directories_are_counted_too(tmp_path):
    path = make_task(tmp_path)
    (path / "junk").mkdir()
    for i in range(30):
        (path / "junk" / str(i)).touch()
    assert [r.code for r in check_task(load_task(path), max_entries=20)] == ["static.too_many_entries"]


def test_oversized_dockerfile_is_rejected_unread(tmp_path):
    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\n" + "# padding\n" * 200_000)
    [reason] = check_task(load_task(path))
    assert reason.code == "static.build_file_too_large" and "Dockerfile" in reason.message


def test_symlink_loop_is_reported_not_raised(tmp_path):
    path = make_task(tmp_path)
    os.symlink("b", path / "environment" / "a")
    os.symlink("a", path / "environment" / "b")
    assert set(codes(path)) == {"static.symlink_escape"}


def test_fifo_in_tests_is_not_read(tmp_path):
    path = make_task(tmp_path, files={"environment/x.txt": CSV})
    os.mkfifo(path / "tests" / "expected.txt")
    assert codes(path) == []


# -- the build context's content hash survives the streaming rewrite ------------------------

def _old_context_hash(task, dockerfile: str) -> str:
    """The content hash as ImageBuilder._context computed it before it streamed files (whole reads)."""
    from docker.utils.build import exclude_paths

    root = task.environment_dir
    ignore = root / ".dockerignore"
    patterns = ignore.read_text(errors="replace").splitlines() if ignore.is_file() else []
    patterns = [p.strip() for p in patterns if p.strip() and not p.strip().startswith("#")]
    names = sorted(p for p in exclude_paths(str(root), patterns, dockerfile="Dockerfile") if p != "Dockerfile")
    digest = hashlib.sha256(b"aes-context-v1\0")
    with tarfile.open(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            path = root / name
            info = tar.gettarinfo(str(path), arcname=name)
            mode = os.lstat(path).st_mode
            digest.update(f"{name}\0{info.type!r}\0{mode & 0o777:o}\0{info.linkname}\0".encode())
            if stat.S_ISREG(mode):
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(b"Dockerfile\0" + hashlib.sha256(dockerfile.encode()).digest())
    return digest.hexdigest()


def test_context_hash_is_unchanged_by_streaming(tmp_path):
    from aes.sandbox.images import ImageBuilder

    path = make_task(tmp_path, "ctx", files={"environment/data.txt": "hello\n", "environment/.dockerignore": "ignored.txt\n",
                                             "environment/ignored.txt": "x", "environment/empty": ""})
    env = path / "environment"
    (env / "sub" / "dir").mkdir(parents=True)
    (env / "sub" / "dir" / "big.bin").write_bytes(bytes(range(256)) * (3 * 4096 + 7))  # 3 MiB, many tar chunks
    os.symlink("data.txt", env / "link")
    for p in [env, *env.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    task = load_task(path)
    dockerfile = "FROM python:3.12-slim\nWORKDIR /app\n"
    context, digest = ImageBuilder._context(ImageBuilder.__new__(ImageBuilder), task, dockerfile)
    with context:
        # computed with the pre-streaming code (images.py at 0871b12) on this same context
        assert digest == "da5ed9cdeb50f0a65b50949eb61aaccfb7efff65360045708d1dac2fb855784e"
        assert digest == _old_context_hash(task, dockerfile)
        with tarfile.open(fileobj=context, mode="r") as tar:
            assert tar.extractfile("sub/dir/big.bin").read() == (env / "sub" / "dir" / "big.bin").read_bytes()
            assert tar.extractfile("Dockerfile").read() == dockerfile.encode()
            assert "ignored.txt" not in tar.getnames() and tar.getmember("link").issym()


# -- start-up variables in task.toml: they reach the tests after aes cleared the image's ----------

STARTUP = [("LD_PRELOAD", "/app/libx.so"), ("LD_LIBRARY_PATH", "/app"), ("BASH_ENV", "/app/hook.sh"), ("ENV", "/tmp/x"),
           ("PYTHONSTARTUP", "/app/s.py"), ("PYTHONPATH", "/app"), ("PYTHONHOME", "/app"), ("PATH", "/app/bin:/usr/bin"),
           ("PATH", "/usr/bin::/bin"), ("PATH", "bin:/usr/bin"), ("NODE_OPTIONS", "--require=./h.js"), ("PERL5OPT", "-Mx"),
           ("RUBYOPT", "-rx"), ("PYTEST_ADDOPTS", "-p x"), ("PYTEST_PLUGINS", "x"), ("GIT_CONFIG_GLOBAL", "/app/g"),
           ("GIT_DIR", "/app/.git"), ("HOME", "/app"), ("XDG_CONFIG_HOME", "/app"), ("JAVA_TOOL_OPTIONS", "-javaagent:/a"),
           ("PIP_FIND_LINKS", "/app"), ("PROMPT_COMMAND", "x"), ("GCONV_PATH", "/app"), ("OPENSSL_CONF", "/app/c"),
           ("MAKEFLAGS", "SHELL=/app/x"), ("CC", "/app/cc")]


@pytest.mark.parametrize("table", ["environment.env", "verifier.env"])
@pytest.mark.parametrize("name,value", STARTUP)
def test_task_toml_may_not_set_a_start_up_variable(tmp_path, table, name, value):
    path = make_task(tmp_path, toml=f'[{table}]\n{name} = "{value}"\n')
    reasons = check_task(load_task(path))
    assert [r.code for r in reasons] == [f"static.startup_env.{name}"]
    assert f"[{table}] {name}" in reasons[0].message


@pytest.mark.parametrize("name,value", [("API_KEY", "x"), ("PATH", "/usr/local/bin:/usr/bin:/bin"), ("PYTHONUNBUFFERED", "1"),
                                        ("PYTHONPATH", "/usr/lib/python3/dist-packages"), ("GIT_AUTHOR_NAME", "a"),
                                        ("PYTHONDONTWRITEBYTECODE", "1"), ("DB_HOST", "127.0.0.1"), ("LANG", "C.UTF-8")])
def test_ordinary_variables_are_kept(tmp_path, name, value):
    path = make_task(tmp_path, toml=f'[verifier.env]\n{name} = "{value}"\n[environment.env]\n{name} = "{value}"\n')
    assert codes(path) == []


def test_a_variable_name_cannot_smuggle_another_variable(tmp_path):
    path = make_task(tmp_path, toml='[environment.env]\n"LD_PRELOAD=/app/x.so#" = "1"\n[solution.env]\n"A B" = "1"\n')
    assert codes(path) == ["static.bad_env_name", "static.bad_env_name", "static.startup_env"]


def test_bash_function_exports_are_start_up_variables(tmp_path):
    path = make_task(tmp_path, toml='[verifier.env]\n"BASH_FUNC_python3%%" = "() { echo 1 > /logs/verifier/reward.txt; }"\n')
    assert codes(path) == ["static.bad_env_name", "static.startup_env"]
