"""The persistent shell session the terminal agent runs its commands in."""

from __future__ import annotations

import pytest

from aes.sandbox.shell import ShellSession, syntax_problem
from aes.tasks import load_task
from tests.conftest import PROC_ARGS, make_task


def test_syntax_problems_are_caught_before_running():
    assert syntax_problem("echo ok") is None
    assert "matching" in syntax_problem('echo "abc')
    assert "here-document" in syntax_problem("cat <<EOF\nhello\n")
    assert syntax_problem("ls (")


@pytest.fixture
def shell(sandbox, tmp_path):
    task = load_task(make_task(tmp_path))
    with sandbox.start(sandbox.build(task).image, task) as container:
        session = ShellSession(container)
        yield session
        session.close()


pytestmark_docker = pytest.mark.docker


@pytestmark_docker
def test_state_persists_between_commands(shell):
    assert shell.run("cd /tmp && export GREETING=hi", 10).exit_code == 0
    out = shell.run("pwd; echo $GREETING", 10)
    assert out.output.split() == ["/tmp", "hi"] and out.exit_code == 0


@pytestmark_docker
def test_exit_status_stderr_and_no_stdin(shell):
    out = shell.run("echo to-err >&2; cat; false", 10)
    assert out.exit_code == 1 and out.output.strip() == "to-err"


@pytestmark_docker
def test_output_without_trailing_newline_is_kept_exactly(shell):
    assert shell.run("printf abc", 10).output == "abc"
    assert shell.run("printf 'a\\nb\\n'", 10).output == "a\nb\n"


@pytestmark_docker
def test_timeout_kills_the_command_not_the_session(shell):
    out = shell.run("cd /var; sleep 300", 1)
    assert out.timed_out and out.exit_code is None
    after = shell.run(f"pwd; {PROC_ARGS} | grep -c '[s]leep 300'", 10)
    assert after.output.split() == ["/var", "0"]


@pytestmark_docker
def test_exit_starts_a_new_shell(shell):
    out = shell.run("exit 3", 10)
    assert "shell exited" in out.output
    assert shell.run("echo back", 10).output.strip() == "back"


@pytestmark_docker
def test_syntax_error_does_not_hang_or_kill_the_session(shell):
    assert shell.run("cd /etc", 10).exit_code == 0
    bad = shell.run('echo "unterminated', 10)
    assert bad.exit_code == 2 and not bad.timed_out
    assert shell.run("pwd", 10).output.strip() == "/etc"


@pytestmark_docker
def test_a_command_of_comments_only_keeps_the_session(shell):
    assert shell.run("cd /etc", 10).exit_code == 0
    out = shell.run("# list the files\n# then read them", 10)
    assert (out.exit_code, out.output) == (0, "")  # what `bash -c` gives a script of comments
    assert shell.run("pwd", 10).output.strip() == "/etc"


@pytestmark_docker
def test_background_job_output_does_not_leak_into_later_commands(shell):
    shell.run("(sleep 0.5; echo LATE) &", 10)
    import time

    time.sleep(1)
    assert "LATE" not in shell.run("echo now", 10).output
