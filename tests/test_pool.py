"""The pool store: dedupe by content, status rules, verdicts, and survival of kill -9."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from aes.pool import AssignmentLog, PoolError, PoolStore, content_hash
from tests.conftest import REPO, make_task


def test_same_content_is_stored_once(tmp_path):
    pool = PoolStore(tmp_path / "pool")
    a = make_task(tmp_path, "a")
    first, created = pool.add(a, name="test/a")
    again, created_again = pool.add(a, name="test/a-renamed")
    assert created and not created_again and again.env_id == first.env_id
    assert (first.path / "task.toml").exists() and first.load().env_id == first.env_id


def test_content_hash_sees_every_byte_and_the_exec_bit(tmp_path):
    path = make_task(tmp_path)
    before = content_hash(path)
    (path / "tests" / "test.sh").chmod(0o755)
    after_chmod = content_hash(path)
    (path / "instruction.md").write_text("Write 43 to /app/answer.txt.\n")
    assert len({before, after_chmod, content_hash(path)}) == 3


def test_status_transitions_are_enforced(tmp_path):
    pool = PoolStore(tmp_path / "pool")
    env, _ = pool.add(make_task(tmp_path), name="test/t")
    for status in ("valid", "calibrated", "admitted", "retired", "admitted"):
        pool.set_status(env.env_id, status)
    with pytest.raises(PoolError, match="admitted -> invalid"):
        pool.set_status(env.env_id, "invalid")
    pool.set_status(env.env_id, "admitted", mean_reward=0.5, std_reward=0.2)
    assert pool.get(env.env_id).mean_reward == 0.5 and pool.counts() == {"admitted": 1}


def test_verdicts_and_assignments_are_kept(tmp_path):
    pool = PoolStore(tmp_path / "pool")
    env, _ = pool.add(make_task(tmp_path), name="test/t")
    pool.add_verdict(env.env_id, "oracle", False, ["oracle.reward_below_one: 0.5"], {"reward": 0.5})
    [verdict] = pool.verdicts(env.env_id)
    assert verdict["reasons"] == ["oracle.reward_below_one: 0.5"] and verdict["details"] == {"reward": 0.5}
    log = AssignmentLog(pool)
    aid = log.open(1, env.env_id, {"direction": "harder"})
    log.close(aid, "admitted", env.env_id, 0.12, 3400)
    [row] = log.rows(1)
    assert row["outcome"] == "admitted" and row["spec"] == {"direction": "harder"}


WRITER = textwrap.dedent("""
    import sys, shutil, pathlib
    sys.path.insert(0, {repo!r})
    from aes.pool import PoolStore
    pool = PoolStore({pool!r})
    src = pathlib.Path({src!r})
    print("ready", flush=True)
    for i in range(10_000):
        d = src / f"t{{i % 40}}"
        env, created = pool.add(d, name=f"test/t{{i % 40}}")
        if env.status == "proposed":
            pool.set_status(env.env_id, "valid")
        elif env.status == "valid":
            pool.set_status(env.env_id, "calibrated")
        elif env.status == "calibrated":
            pool.set_status(env.env_id, "admitted")
        print("admitted" if env.status == "admitted" else "step", env.env_id, flush=True)
""")


@pytest.mark.security
def test_kill_9_at_random_points_loses_and_duplicates_nothing(tmp_path):
    src = tmp_path / "src"
    for i in range(40):
        make_task(src, f"t{i}", instruction=f"Task number {i}.\n")
    root = tmp_path / "pool"
    script = WRITER.format(repo=str(REPO), pool=str(root), src=str(src))
    rng = random.Random(7)
    admitted_seen: set[str] = set()
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "ready\n"  # killed while it writes, however slowly it started
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        complete = out.split("\n")[:-1]  # the kill may tear the last line
        admitted_seen |= {line.split()[1] for line in complete if line.startswith("admitted ")}
        pool = PoolStore(root)
        assert pool.check() == []
        admitted_now = {e.env_id for e in pool.envs("admitted")}
        assert admitted_seen <= admitted_now  # nothing reported admitted was lost
        hashes = [e.content_hash for e in pool.envs()]
        assert len(hashes) == len(set(hashes)) <= 40  # no duplicates
    assert admitted_seen, "the writer never got far enough; the test proved nothing"


def test_the_pool_never_admits_past_its_capacity(tmp_path):
    """Episodes admitting at once (threads, as harness.episodes_at_once runs them) never overshoot the
    cap: the count and the change are one transaction; the rest wait (calibrated) for room."""
    import threading

    pool = PoolStore(tmp_path / "pool", capacity=3)
    seed, _ = pool.add(make_task(tmp_path, "seed"), name="seed", status="admitted", source="seed")
    envs = []
    for i in range(6):
        env, _ = pool.add(make_task(tmp_path, f"t{i}", instruction=f"Task {i}.\n"), name=f"t{i}")
        pool.set_status(env.env_id, "valid")
        pool.set_status(env.env_id, "calibrated", mean_reward=0.5, std_reward=0.2)
        envs.append(env)
    got: dict[str, str] = {}
    threads = [threading.Thread(target=lambda e=e: got.__setitem__(e.env_id, pool.set_status(e.env_id, "admitted")))
               for e in envs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(pool.envs("admitted")) == 3 and sorted(Counter(got.values()).items()) == [("admitted", 2),
                                                                                         ("calibrated", 4)]
    assert pool.ever_admitted() == 2  # seeds do not count as entries from the proposer
    pool.set_status(next(e for e, s in got.items() if s == "admitted"), "retired")
    assert len(pool.admit_waiting()) == 1 and len(pool.envs("admitted")) == 3 and len(pool.envs("calibrated")) == 3
    assert pool.ever_admitted() == 3
