"""The Docker sandbox primitives: exec deadlines, output caps, files, teardown, reaping, builds."""

from __future__ import annotations

import docker
import pytest

from aes.sandbox import Container, DockerSandbox
from aes.sandbox.docker_client import LABEL_MANAGED, owner_labels, reap_orphans
from aes.tasks import load_task
from tests.conftest import PROC_ARGS, make_task

pytestmark = pytest.mark.docker


@pytest.fixture
def box(sandbox: DockerSandbox, tmp_path) -> Container:
    task = load_task(make_task(tmp_path))
    image = sandbox.build(task).image
    with sandbox.start(image, task) as container:
        yield container


def test_exec_returns_output_and_exit_code(box):
    result = box.exec("echo out; echo err >&2; exit 3", 30)
    assert result.exit_code == 3
    assert "out" in result.output and "err" in result.output
    assert not result.timed_out


def test_exec_runs_in_task_workdir_as_bash(box):
    assert box.exec("pwd; echo $BASH_VERSION", 30).output.splitlines()[0] == "/app"


def test_exec_timeout_kills_the_command(box):
    result = box.exec("sleep 300; echo never", 1)
    assert result.timed_out and result.exit_code is None
    assert "never" not in result.output
    assert "sleep 300" not in box.exec(PROC_ARGS, 30).output


def test_background_process_does_not_hold_exec_open(box):
    result = box.exec("sleep 300 & echo started", 20)
    assert not result.timed_out
    assert result.exit_code == 0 and "started" in result.output


def test_output_flood_is_capped_head_and_tail(box):
    limit = box.output_limit
    result = box.exec("echo FIRST; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo LAST", 60)
    assert result.exit_code == 0
    assert result.truncated_bytes > 0
    assert len(result.output) < limit + 200
    assert result.output.startswith("FIRST") and result.output.rstrip().endswith("LAST")


def test_upload_and_read_files(box, tmp_path):
    (tmp_path / "up" / "sub").mkdir(parents=True)
    (tmp_path / "up" / "sub" / "f.txt").write_text("payload")
    box.upload_dir(tmp_path / "up", "/data")
    assert box.exec("cat /data/sub/f.txt", 30).output == "payload"
    assert box.read_file("/data/sub/f.txt") == b"payload"
    assert box.read_file("/data/missing") is None
    box.exec("ln -s /etc/passwd /data/link", 30)
    assert box.read_file("/data/link") is None


def test_download_directory_stays_inside_dest(box, tmp_path):
    box.exec("mkdir -p /out/d && echo a > /out/d/a.txt && ln -s /etc/passwd /out/d/bad", 30)
    assert box.download("/out", tmp_path / "dl")
    assert (tmp_path / "dl" / "out" / "d" / "a.txt").read_text() == "a\n"
    assert not (tmp_path / "dl" / "out" / "d" / "bad").exists()
    assert not box.download("/nonexistent", tmp_path / "dl2")


def test_no_network_task_has_only_loopback(box):
    assert box.exec("ls /sys/class/net", 30).output.split() == ["lo"]


def test_fork_bomb_is_contained_by_pids_limit(sandbox, box, tmp_path):
    task = load_task(make_task(tmp_path, "other"))
    with sandbox.start(sandbox.build(task).image, task) as other:
        box.exec("bomb() { bomb | bomb & }; bomb", 5)
        box.exec("sleep 3", 10)
        pids = int(sandbox.client.api.inspect_container(box.id)["HostConfig"]["PidsLimit"])
        assert pids == sandbox.cfg.pids_limit
        assert other.exec("echo alive", 30).output.strip() == "alive"
    box.remove()
    with pytest.raises(docker.errors.NotFound):
        sandbox.client.containers.get(box.id)


def test_remove_does_not_wait_for_sigterm(sandbox, tmp_path):
    task = load_task(make_task(tmp_path))
    container = sandbox.start(sandbox.build(task).image, task)
    container.exec("trap '' TERM; nohup sleep 1000 >/dev/null 2>&1 &", 30)
    container.remove()
    with pytest.raises(docker.errors.NotFound):
        sandbox.client.containers.get(container.id)


def test_reaper_removes_containers_of_dead_owners_only(sandbox, cfg):
    client = sandbox.client
    dead = {**owner_labels("trial"), "aes.pid": "999999999", "aes.pid_start": "0"}
    orphan = client.containers.create(cfg.sandbox.base_image, ["sleep", "60"], labels=dead)
    mine = client.containers.create(cfg.sandbox.base_image, ["sleep", "60"], labels=owner_labels("trial"))
    try:
        assert reap_orphans(cfg.sandbox) >= 1
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(orphan.id)
        assert client.containers.get(mine.id).labels[LABEL_MANAGED] == "true"
    finally:
        mine.remove(force=True)


def test_unchanged_environment_is_not_rebuilt(sandbox, tmp_path):
    first = sandbox.build(load_task(make_task(tmp_path, "a", files={"environment/data.txt": "v1"})))
    again = sandbox.build(load_task(make_task(tmp_path, "b", files={"environment/data.txt": "v1"})))
    changed = sandbox.build(load_task(make_task(tmp_path, "c", files={"environment/data.txt": "v2"})))
    assert first.image == again.image and again.cached
    assert changed.image != first.image


def test_dockerignore_is_respected(sandbox, tmp_path):
    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\nCOPY . /ctx\n",
                     files={"environment/.dockerignore": "secret.txt\n",
                            "environment/secret.txt": "x", "environment/kept.txt": "y"})
    task = load_task(path)
    with sandbox.start(sandbox.build(task).image, task) as container:
        assert sorted(container.exec("ls /ctx", 30).output.split()) == ["Dockerfile", "kept.txt"]


def test_build_failure_reports_the_failing_step(sandbox, tmp_path):
    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\nRUN echo broken-step && exit 7\n")
    result = sandbox.build(load_task(path))
    assert result.image is None
    assert result.reason.code == "build.failed"
    assert "broken-step" in result.reason.message


def test_build_timeout_cancels_the_build(sandbox, tmp_path):
    path = make_task(tmp_path, dockerfile="FROM python:3.12-slim\nRUN sleep 120 && echo slow-build-step\n",
                     toml='[environment]\nbuild_timeout_sec = 3\n')
    result = sandbox.build(load_task(path))
    assert result.image is None and result.reason.code == "build.timeout"
    import time

    for _ in range(50):  # the engine cancels the build once the connection is cut
        running = [c for c in sandbox.client.containers.list()
                   if "slow-build-step" in " ".join(c.attrs["Config"]["Cmd"] or [])]
        if not running:
            break
        time.sleep(0.2)
    assert not running


def test_missing_base_without_alias_is_a_clear_reason(sandbox, tmp_path):
    path = make_task(tmp_path, dockerfile="FROM registry.invalid/nothing:1\n")
    result = sandbox.build(load_task(path))
    assert result.reason.code == "build.base_unavailable"
    assert "registry.invalid/nothing:1" in result.reason.message
