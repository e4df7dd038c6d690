"""Static admission checks: leaks of tests/solution, host power, unsupported Dockerfiles."""

from __future__ import annotations

import os

from aes.tasks import check_task, load_task
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
