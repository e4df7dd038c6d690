"""Hostile or broken proposals: each is rejected with its own reason, or contained, and the
validation of the batch around it goes on.

All of them go through one ``validate_all`` call next to an honest task, as a round of
proposals would: one bad task may not take the others down or stall them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aes.admission import Validator, validate_all
from aes.proposer.files import DraftError, parse_files
from tests.conftest import make_task

pytestmark = [pytest.mark.docker, pytest.mark.security]

TOML = '[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "no-network"\n'


def _privileged_toml(root: Path) -> Path:
    return make_task(root, "privileged_toml", toml=TOML + "privileged = true\n")


def _compose_host_mount(root: Path) -> Path:
    compose = "services:\n  main:\n    build: .\n    volumes: ['/:/host']\n"
    return make_task(root, "compose_host_mount", files={"environment/docker-compose.yaml": compose})


def _insecure_run(root: Path) -> Path:
    return make_task(root, "insecure_run", dockerfile="FROM python:3.12-slim\nRUN --security=insecure id\n")


def _docker_socket(root: Path) -> Path:
    return make_task(root, "docker_socket", dockerfile="FROM python:3.12-slim\nVOLUME /var/run/docker.sock\n")


def _huge_context(root: Path) -> Path:
    path = make_task(root, "huge_context")
    with open(path / "environment" / "blob.bin", "wb") as fh:
        fh.truncate(300 * 2**20)  # sparse: 300 MiB of context, no disk used
    return path


def _endless_build(root: Path) -> Path:
    return make_task(root, "endless_build", dockerfile="FROM python:3.12-slim\nRUN sleep 100000\n",
                     toml=TOML + "build_timeout_sec = 5\n")


def _garbage_instruction(root: Path) -> Path:
    path = make_task(root, "garbage_instruction")
    (path / "instruction.md").write_bytes(b"\xff\xfe\x00garbage \xc3\x28 not text")
    return path


def _garbage_toml(root: Path) -> Path:
    path = make_task(root, "garbage_toml")
    (path / "task.toml").write_bytes(os.urandom(512))
    return path


def _symlink_out(root: Path) -> Path:
    path = make_task(root, "symlink_out")
    os.symlink("/etc/shadow", path / "environment" / "shadow")
    return path


def _symlinked_tests(root: Path) -> Path:
    path = make_task(root, "symlinked_tests")
    (path / "tests" / "test.sh").unlink()
    os.symlink("/etc/passwd", path / "tests" / "test.sh")
    return path


def _fifo_in_context(root: Path) -> Path:
    path = make_task(root, "fifo_in_context")  # reading a FIFO would block forever
    os.mkfifo(path / "environment" / "pipe")
    os.mkfifo(path / "solution" / "pipe")
    return path


def _traversal_name(root: Path) -> Path:
    return make_task(root, "traversal_name", toml='[task]\nname = "../../../../tmp/aes-escaped"\n' + TOML)


# name -> (make, reason codes expected; [] = contained: valid and harmless)
HOSTILE = {
    "privileged_toml": (_privileged_toml, ["static.dangerous_option"]),
    "compose_host_mount": (_compose_host_mount, ["static.dangerous_option"]),
    "insecure_run": (_insecure_run, ["static.dangerous_option"]),
    "docker_socket": (_docker_socket, ["static.dangerous_option"]),
    "huge_context": (_huge_context, ["static.context_too_large"]),
    "endless_build": (_endless_build, ["build.timeout"]),
    "garbage_instruction": (_garbage_instruction, ["static.layout.not_utf8"]),
    "garbage_toml": (_garbage_toml, ["static.layout.not_utf8"]),
    "symlink_out": (_symlink_out, ["static.symlink_escape"]),
    "symlinked_tests": (_symlinked_tests, ["static.layout.missing_file"]),  # "is a symlink"
    "fifo_in_context": (_fifo_in_context, []),
    "traversal_name": (_traversal_name, ["static.task_toml.bad_name"]),
}


@pytest.fixture(scope="module")
def verdicts(sandbox, cfg, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    paths = [make_task(root, "honest")] + [make(root) for make, _ in HOSTILE.values()]
    reports = validate_all(Validator(cfg.sandbox), paths, concurrency=4, show_progress=False)
    return {Path(r.task).name: r for r in reports}


def test_the_honest_task_in_the_batch_is_admitted(verdicts):
    assert verdicts["honest"].valid, [str(r) for r in verdicts["honest"].reasons]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_proposal_gets_its_own_reason(verdicts, name):
    report = verdicts[name]
    codes = sorted({r.code for r in report.reasons})
    assert codes == HOSTILE[name][1], [str(r) for r in report.reasons]
    assert all(r.message for r in report.reasons)


def test_a_task_name_cannot_escape_into_the_host(verdicts):
    assert not Path("/tmp/aes-escaped").exists()


@pytest.mark.parametrize("path", ["../../etc/cron.d/x", "/etc/passwd", "tests/../../x", "elsewhere/file"])
def test_proposed_file_paths_stay_inside_the_task(path):
    with pytest.raises(DraftError, match="not inside the task layout"):
        parse_files(f'<file path="{path}">\nhello\n</file>\n')
