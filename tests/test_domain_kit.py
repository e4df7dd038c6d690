"""The domain kit (aes/domains/kit/): its copies in the seeds, and the untrusted child's boundary
attacked by an agent's code, each attack run against the kit as it was before this boundary
(tests/fixtures/kit_before/untrusted.py, the earlier kit, kept verbatim for that) and against the
kit now: reward earned before, 0 after.

What an agent's code tries, from inside the child (as uid 64999): steer the tests' control flow
with the class of an exception it raises (a ``StopIteration`` ends the test's ``map`` early),
leave a process that outlives the child (``setsid`` and a double fork), leave data for the next
child (``/tmp``, ``/var/tmp``, ``/dev/shm``, a folder or file others may write, System V shared
memory), read ``/tests`` while the gate runs the public suite, and gain root through a set-user-ID
program it left in the repository."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import make_task

REPO = Path(__file__).resolve().parents[1]
DOMAINS = REPO / "aes" / "domains"
KIT = DOMAINS / "kit"
BEFORE = REPO / "tests" / "fixtures" / "kit_before" / "untrusted.py"
REPLAY = REPO / "tests" / "fixtures" / "kit_attacks" / "replay.py"
TELEMETRY = DOMAINS / "swe" / "seeds" / "telemetry-time-windows"


# -- the copies ------------------------------------------------------------------------------------
def test_every_seed_copy_of_a_kit_file_is_byte_equal_to_the_kit():
    kit = {path.name: path.read_bytes() for path in KIT.glob("*.py")}
    copies = [path for name in kit for path in DOMAINS.glob(f"*/seeds/*/tests/{name}")]
    assert len([p for p in copies if p.name == "untrusted.py"]) >= 8  # swe and gpu_kernels, four seeds each
    assert [str(p.relative_to(DOMAINS)) for p in copies if p.read_bytes() != kit[p.name]] == []


def test_the_earlier_kit_kept_for_the_attacks_is_not_the_kit():
    assert BEFORE.read_bytes() != (KIT / "untrusted.py").read_bytes()


# -- the mechanisms, in a container ----------------------------------------------------------------
AGENT = r'''
import os, signal, subprocess, sys, time

def add_one(x):
    return x + 1

def stop(x):
    raise StopIteration("the test's loop ends here")

def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            time.sleep(600)
        os._exit(0)
    return True

PLACES = ["/tmp/leak", "/var/tmp/leak", "/dev/shm/leak", "/srv/box/leak", "/srv/file"]

def leave(text):
    for path in PLACES:
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError:
            pass
    try:  # System V shared memory, key 4242, readable by its user
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        ident = libc.shmget(4242, 4096, 0o1000 | 0o600)
        address = libc.shmat(ident, None, 0)
        ctypes.memmove(address, text.encode(), len(text))
    except Exception:
        pass
    return True

def read():
    found = {}
    for path in PLACES:
        try:
            found[path] = open(path).read()
        except OSError:
            found[path] = None
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        ident = libc.shmget(4242, 4096, 0)
        found["shm"] = ctypes.string_at(libc.shmat(ident, None, 0), 6).decode() if ident >= 0 else None
    except Exception:
        found["shm"] = None
    return found

def as_root(path):
    """What a set-user-ID-root program the agent left reads."""
    run = subprocess.run(["/srv/rcat", path], capture_output=True, text=True)
    return run.stdout or None
'''

DRIVER = r'''
import json, os, subprocess, sys
sys.path.insert(0, "/tests")
from untrusted import Untrusted

def left():
    found = []
    for name in os.listdir("/proc"):
        try:
            status = open(f"/proc/{name}/status").read()
        except OSError:
            continue
        uids = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
        if uids and "64999" in uids[0] and "\nState:\tZ" not in status:
            found.append(name)
    return found

out = {}
gate = subprocess.run([sys.executable, "/tests/untrusted.py", "--", "cat", "/tests/secret.txt"], capture_output=True, text=True)  # first, as in test.sh
out["gate_read"] = "expected-values" in gate.stdout
with Untrusted(["/app"]) as child:
    agent = child.module("agent")
    try:
        got = list(map(agent.stop, [1, 2, 3]))
        out["map"] = f"ended quietly with {got}"
    except Exception as exc:
        out["map"] = type(exc).__name__
    out["as_root"] = agent.as_root("/tests/secret.txt")
    agent.daemon()
    agent.leave("secret")
out["left"] = left()
with Untrusted(["/app"]) as child:
    out["read"] = child.module("agent").read()
print("RESULT " + json.dumps(out))
'''

SETUP = ("mkdir -p /srv/box /tests && chmod 777 /srv/box && : > /srv/file && chmod 666 /srv/file "
         "&& cp /bin/cat /srv/rcat && chmod 4755 /srv/rcat && echo expected-values > /tests/secret.txt")


def _mechanisms(sandbox, cfg, kit: Path, tmp_path: Path) -> dict:
    """DRIVER's findings in a fresh container (the base image) with ``kit`` as /tests/untrusted.py."""
    (tmp_path / "app").mkdir(parents=True)
    (tmp_path / "app" / "agent.py").write_text(AGENT)
    (tmp_path / "tests").mkdir()
    shutil.copy(kit, tmp_path / "tests" / "untrusted.py")
    (tmp_path / "tests" / "driver.py").write_text(DRIVER)
    container = sandbox.run_container(cfg.sandbox.base_image, cpus=1, memory_mb=1024, label="kit-mechanisms")
    try:
        container.upload_dir(tmp_path / "app", "/app")
        container.upload_dir(tmp_path / "tests", "/tests")
        setup = container.exec(SETUP, 60, user="0")
        assert setup.exit_code == 0, setup.output
        run = container.exec(["python3", "/tests/driver.py"], 240, user="0")
        line = [x for x in run.output.splitlines() if x.startswith("RESULT ")]
        assert run.exit_code == 0 and line, run.output[-3000:]
        return json.loads(line[0][len("RESULT "):])
    finally:
        container.remove()


@pytest.mark.docker
def test_the_childs_boundary_holds_where_the_earlier_kit_let_each_attack_through(sandbox, cfg, tmp_path):
    before = _mechanisms(sandbox, cfg, BEFORE, tmp_path / "before")
    after = _mechanisms(sandbox, cfg, KIT / "untrusted.py", tmp_path / "after")
    # an exception it raises steered the test: StopIteration ended map() quietly, with nothing checked
    assert before["map"].startswith("ended quietly"), before
    assert after["map"] == "ChildRaised", after
    # a set-user-ID-root program it left read the expected values
    assert (before["as_root"] or "").strip() == "expected-values", before
    assert after["as_root"] is None, after
    # a process that left the child's session outlived the cleanup
    assert before["left"], before
    assert after["left"] == [], after
    # what the first child left was there for the second
    assert all(value == "secret" for value in before["read"].values()), before
    assert after["read"] == {"/tmp/leak": None, "/var/tmp/leak": None, "/dev/shm/leak": None, "/srv/box/leak": None,
                             "/srv/file": "", "shm": None}, after
    # the command-line gate (test.sh's run of the public suite) could read /tests
    assert before["gate_read"] is True and after["gate_read"] is False


# -- the attacks as an agent's solution, in trials -------------------------------------------------
SHIM = '''from untrusted import Untrusted  # noqa: E402


def raises(exception, call, *args, **kwargs):  # the earlier kit raised the built-in class itself
    try:
        call(*args, **kwargs)
    except exception:
        return True
    except Exception:
        return False
    return False
'''


def _telemetry(tmp_path: Path, name: str, kit: Path, solve: str, files: dict[str, str]) -> Path:
    """The telemetry seed with ``solve`` as its solution (the agent's work) and ``kit`` as its tests' kit."""
    path = tmp_path / name
    shutil.copytree(TELEMETRY, path)
    shutil.copy(kit, path / "tests" / "untrusted.py")
    if kit == BEFORE:
        tests = path / "tests" / "test_outputs.py"
        tests.write_text(tests.read_text().replace("from untrusted import Untrusted, raises  # noqa: E402\n", SHIM))
    (path / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\n" + solve)
    for rel, text in files.items():
        (path / "solution" / rel).write_text(text)
    return path


SETUID = r'''
# --- and a set-user-ID copy of python3 it left in the repository: run as root from the gate, it
# rewrites the private tests before pytest collects them
import os as _os2, subprocess as _sp
_HELPER = "/app/repo/.pyhelper"
if _os2.geteuid() != 0 and _os2.path.exists(_HELPER):
    _sp.run([_HELPER, "-c", "import os\nos.setuid(0)\nopen('/tests/test_outputs.py', 'w').write("
             "'def test_gate_x():\\n    pass\\n\\ndef test_x():\\n    pass\\n')"], capture_output=True)
'''

ATTACKS = {
    # read /tests from the gate, leave the expected values in /tmp for the private tests' child
    "replay-through-tmp": ("cat /solution/replay.py >> /app/repo/telemetry/__init__.py\n",
                           {"replay.py": REPLAY.read_text()}),
    # read /tests from the gate, leave a detached process that serves them to the private tests' child
    "replay-through-a-daemon": ("cat /solution/replay.py >> /app/repo/telemetry/__init__.py\n",
                                {"replay.py": REPLAY.read_text().replace('CARRY = "tmp"', 'CARRY = "daemon"')}),
}
IN_PLACE_ATTACKS = {
    # a set-user-ID program survives only where the tests run in the agent's own container (the
    # sealed verifier carries no set-user-ID bit)
    "setuid-helper": ("cp \"$(readlink -f \"$(command -v python3)\")\" /app/repo/.pyhelper\nchmod 4755 /app/repo/.pyhelper\n"
                      "cat /solution/replay.py /solution/setuid.py >> /app/repo/telemetry/__init__.py\n",
                      {"replay.py": REPLAY.read_text(), "setuid.py": SETUID}),
}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("trusted", [True, False], ids=["sealed", "in-place"])
def test_agent_code_that_attacks_the_kit_earned_reward_before_and_earns_zero_now(sandbox, cfg, tmp_path, trusted):
    """An unfixed package that replays the tests' expected values (special-cased the public
    examples, and read the private tests where the earlier kit let it: from the gate), and one
    that gains root through a set-user-ID copy of python3: each opened both gates and earned
    reward with the earlier kit (the replays 0.29: the private tests' literal cases; the set-user-ID
    one 1.0), each earns 0 with this one (the private gate's cases are nowhere it can read)."""
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(dataclasses.replace(cfg.sandbox, trusted_verifier=trusted), sandbox)
    attacks = {**ATTACKS, **({} if trusted else IN_PLACE_ATTACKS)}
    rewards = {}
    for name, (solve, files) in attacks.items():
        for when, kit in (("before", BEFORE), ("after", KIT / "untrusted.py")):
            result = runner.run(load(_telemetry(tmp_path / when, name, kit, solve, files)), OracleAgent())
            assert result.agent_exit_code == 0, (name, when, result.agent_output)
            rewards[(name, when)] = (result.reward, result.verifier_output[-1500:])
    print({key: reward for key, (reward, _) in rewards.items()})
    for name in attacks:
        before, after = rewards[(name, "before")], rewards[(name, "after")]
        assert before[0] is not None and before[0] > 0.0, (name, before)  # both gates opened
        assert after[0] == 0.0, (name, after)


def load(path: Path):
    from aes.tasks import load_task

    return load_task(path)


# -- an exception as control flow, in a task of its own ---------------------------------------------
DURATIONS_TESTS = '''import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from untrusted import Untrusted  # noqa: E402

CASES = {"90s": 90, "2m": 120, "1h30m": 5400, "45m15s": 2715}
MORE = {"1h1m1s": 3661, "2h": 7200, "0s": 0}


@pytest.fixture(scope="module")
def durations():
    with Untrusted(["/app/pkg"]) as child:
        yield child.module("durations")


def test_gate_examples(durations):
    for text, seconds in zip(CASES, map(durations.parse_duration, CASES)):
        assert seconds == CASES[text], text


def test_more_units(durations):
    for text, seconds in zip(MORE, map(durations.parse_duration, MORE)):
        assert seconds == MORE[text], text
'''
DURATIONS_TEST_SH = '''#!/bin/bash
mkdir -p /logs/verifier
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
python3 - <<'PY'
import xml.etree.ElementTree as ET
cases = {c.get("name"): not any(x.tag in ("failure", "error", "skipped") for x in c)
         for c in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase")}
gates = [ok for name, ok in cases.items() if name.startswith("test_gate_")]
reward = sum(cases.values()) / len(cases) if gates and all(gates) else 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.4f}\\n")
PY
'''
PARSER = '''import re


def parse_duration(text):
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\\d+)([hms])", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(text)
    return sum(int(a) * units[b] for a, b in parts)
'''


@pytest.mark.docker
@pytest.mark.slow
def test_an_exception_class_chosen_by_the_agent_no_longer_steers_the_tests(sandbox, cfg, tmp_path):
    """Tests that check each example in a ``zip(..., map(...))`` loop: a parser that raises
    StopIteration ended the loop before its first check with the earlier kit (reward 1.0); now
    the call raises ChildRaised and the tests fail (0). The real parser earns 1.0 with both."""
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    dockerfile = ("FROM python:3.12-slim\n"
                  "RUN python3 -m pytest --version >/dev/null 2>&1 || pip install --no-cache-dir pytest==8.3.5\n"
                  "WORKDIR /app\nCOPY pkg/ /app/pkg/\n")
    solutions = {"honest": ("cp /solution/durations.py /app/pkg/durations.py\n", PARSER),
                 "stop-iteration": ("printf 'def parse_duration(text):\\n    raise StopIteration\\n' > /app/pkg/durations.py\n", "")}
    rewards = {}
    for when, kit in (("before", BEFORE), ("after", KIT / "untrusted.py")):
        for name, (solve, parser) in solutions.items():
            path = make_task(tmp_path / when, name, dockerfile=dockerfile, solve=solve, test=DURATIONS_TEST_SH,
                             files={"environment/pkg/durations.py": "def parse_duration(text):\n    raise NotImplementedError\n",
                                    "tests/test_outputs.py": DURATIONS_TESTS, "solution/durations.py": parser})
            shutil.copy(kit, path / "tests" / "untrusted.py")
            result = runner.run(load(path), OracleAgent())
            rewards[(name, when)] = result.reward
            assert result.reward is not None, (name, when, result.verifier_output[-2000:])
    assert rewards == {("honest", "before"): 1.0, ("stop-iteration", "before"): 1.0,
                       ("honest", "after"): 1.0, ("stop-iteration", "after"): 0.0}
