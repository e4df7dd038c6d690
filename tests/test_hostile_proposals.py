"""Hostile or broken proposals: each is rejected with its own reason, or contained, and the
validation of the batch around it goes on, each in bounded time.

All of them go through one ``validate_all`` call next to an honest task, as a round of
proposals would: one bad task may not take the others down or stall them. Admission's time
bounds are set small here (as ``admission.*`` allows) so that the cases that would hang end fast;
the tests further down show what the attacks earned with the defence off.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aes.admission import Validator, validate_all
from aes.config import AdmissionConfig
from aes.proposer.files import DraftError, parse_files
from aes.sandbox import AgentRun, NopAgent, OracleAgent, Outcome, TrialRunner
from aes.sandbox.container import tar_entries
from aes.tasks import load_task
from tests.conftest import REPO, make_task

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


def _env_table(table: str, name: str, value: str):
    def make(root: Path) -> Path:
        return make_task(root, f"env_{table.split('.')[0]}_{name.lower()}", toml=TOML + f'[{table}]\n{name} = "{value}"\n')
    return make


def _env_name_injection(root: Path) -> Path:
    return make_task(root, "env_name_injection", toml=TOML + '[environment.env]\n"LD_PRELOAD=/app/x.so#" = "1"\n')


def _docker_image(root: Path) -> Path:
    return make_task(root, "docker_image", toml=TOML + 'docker_image = "aes-base:bookworm"\n')


IMPOSSIBLE_TEST = ("#!/bin/bash\ncd /tests\nif python3 -c 'import sys; sys.exit(1)'; then echo 1 > /logs/verifier/reward.txt; "
                   "else echo 0 > /logs/verifier/reward.txt; fi\n")
"""Tests no work can pass: only code that runs in their process can make them pass."""
ARMED_DOCKERFILE = ("FROM python:3.12-slim\nENV PYTHONPATH=/app\nWORKDIR /app\nRUN python3 -c \"import site; "
                    "open(site.getsitepackages()[0] + '/zz-armed.pth', 'w').write('import armed_hook\\\\n')\"\n")
"""A .pth line importing a module the image lacks, with the workdir on Python's path."""
ARMING = {"app/armed_hook.py": b"import os\nos._exit(0)\n"}
"""What arms it: every Python process, the tests' too, exits 0 at start."""


def _armed_pth(root: Path) -> Path:
    return make_task(root, "armed_pth", dockerfile=ARMED_DOCKERFILE, test=IMPOSSIBLE_TEST,
                     solve="printf 'import os\\nos._exit(0)\\n' > /app/armed_hook.py\n")


def _armed_profile(root: Path) -> Path:
    dockerfile = ("FROM python:3.12-slim\nWORKDIR /app\n"
                  "RUN echo '[ -f /tmp/.rc ] && . /tmp/.rc' > /etc/profile.d/zz-armed.sh\n")
    test = ("#!/bin/bash\nif bash -lc 'exit 1'; then echo 1 > /logs/verifier/reward.txt; "
            "else echo 0 > /logs/verifier/reward.txt; fi\n")
    return make_task(root, "armed_profile", dockerfile=dockerfile, test=test, solve="echo 'exit 0' > /tmp/.rc\n")


def _image_bash_env(root: Path) -> Path:
    return make_task(root, "image_bash_env", dockerfile="FROM python:3.12-slim\nWORKDIR /app\nENV BASH_ENV=/app/.bashenv\n")


def _reference_overfills_storage(root: Path) -> Path:
    return make_task(root, "reference_overfills_storage", toml=TOML + "storage_mb = 50\n",
                     solve="head -c 120M /dev/zero > /app/blob; sleep 4; echo 42 > /app/answer.txt\n")


def _nested_reward(root: Path) -> Path:
    test = "#!/bin/bash\npython3 -c \"print('[' * 300000 + ']' * 300000)\" > /logs/verifier/reward.json\n"
    return make_task(root, "nested_reward", test=test)


HANGS_WITHOUT_WORK = ("#!/bin/bash\n[ -f /app/answer.txt ] || sleep 100000\n"
                      '[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt || '
                      "echo 0 > /logs/verifier/reward.txt\n")


def _nop_hangs(root: Path) -> Path:
    toml = '[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 3000\n[environment]\nnetwork_mode = "no-network"\n'
    return make_task(root, "nop_hangs", test=HANGS_WITHOUT_WORK, toml=toml)


def _nop_waits_out_a_short_timeout(root: Path) -> Path:
    toml = '[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 4\n[environment]\nnetwork_mode = "no-network"\n'
    return make_task(root, "nop_waits_out_a_short_timeout", test=HANGS_WITHOUT_WORK, toml=toml)


def _endless_reference(root: Path) -> Path:
    toml = '[agent]\ntimeout_sec = 7000\n[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "no-network"\n'
    return make_task(root, "endless_reference", solve="sleep 100000\n", toml=toml)


def _long_declared_build(root: Path) -> Path:
    return make_task(root, "long_declared_build", dockerfile="FROM python:3.12-slim\nRUN sleep 100001\n",
                     toml=TOML + "build_timeout_sec = 3000\n")


def _fork_bomb_build(root: Path) -> Path:
    return make_task(root, "fork_bomb_build", dockerfile="FROM python:3.12-slim\nRUN bomb() { bomb | bomb; }; bomb\n")


def _memory_hog_build(root: Path) -> Path:
    return make_task(root, "memory_hog_build",
                     dockerfile="FROM python:3.12-slim\nRUN python3 -c \"b = bytearray(2 << 30); print(len(b))\"\n")


NOT_UTF8 = "$'\\xff\\xfe-name'"


def _names_not_utf8(root: Path) -> Path:
    solve = (f"echo 42 > /app/answer.txt\ntouch /app/{NOT_UTF8} /tmp/{NOT_UTF8} /logs/agent/{NOT_UTF8}\n"
             f"mkdir /app/{NOT_UTF8}.d && echo x > /app/{NOT_UTF8}.d/f\n")
    return make_task(root, "names_not_utf8", solve=solve)


def _symlink_named_not_utf8(root: Path) -> Path:
    path = make_task(root, "symlink_named_not_utf8")
    os.symlink("/etc/shadow", os.path.join(os.fsencode(path / "environment"), b"\xff\xfe"))
    return path


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
    # class 5: task.toml env after aes cleared the image's hooks, a prebuilt image, hooks baked into the image
    "env_verifier_bash_env": (_env_table("verifier.env", "BASH_ENV", "/app/hook.sh"), ["static.startup_env.BASH_ENV"]),
    "env_environment_ld_preload": (_env_table("environment.env", "LD_PRELOAD", "/app/libhook.so"),
                                   ["static.startup_env.LD_PRELOAD"]),
    "env_verifier_pythonpath": (_env_table("verifier.env", "PYTHONPATH", "/app"), ["static.startup_env.PYTHONPATH"]),
    "env_environment_path": (_env_table("environment.env", "PATH", ".:/usr/bin:/bin"), ["static.startup_env.PATH"]),
    "env_name_injection": (_env_name_injection, ["static.bad_env_name", "static.startup_env"]),
    "docker_image": (_docker_image, ["static.docker_image"]),
    "armed_pth": (_armed_pth, ["build.startup_hook"]),
    "armed_profile": (_armed_profile, ["build.startup_hook"]),
    "image_bash_env": (_image_bash_env, ["build.startup_hook"]),
    # class 7: a verdict for each, in bounded time
    "reference_overfills_storage": (_reference_overfills_storage, ["oracle.storage_exceeded"]),
    "nested_reward": (_nested_reward, ["oracle.bad_reward_file"]),
    "nop_hangs": (_nop_hangs, ["nop.verifier_timeout"]),
    "nop_waits_out_a_short_timeout": (_nop_waits_out_a_short_timeout, []),
    "endless_reference": (_endless_reference, ["oracle.timeout"]),
    "long_declared_build": (_long_declared_build, ["build.timeout"]),
    "fork_bomb_build": (_fork_bomb_build, ["build.process_limit"]),
    "memory_hog_build": (_memory_hog_build, ["build.memory_limit"]),
    "names_not_utf8": (_names_not_utf8, []),
    "symlink_named_not_utf8": (_symlink_named_not_utf8, ["static.symlink_escape"]),
}
BOUNDS = AdmissionConfig(max_build_sec=30, max_reference_sec=20, max_verifier_sec=20, nop_verifier_factor=3.0,
                         nop_verifier_floor_sec=5)
"""Admission's time bounds for this batch (the defaults are 900 s / 60 s: the same mechanism, larger)."""
CASE_SECONDS = 240
"""Each case must end within 4 minutes (the bounds above make each far shorter)."""


def _capped(cfg):
    return dataclasses.replace(cfg.sandbox, build_pids_limit=256, build_memory_mb=512)


@pytest.fixture(scope="module")
def verdicts(sandbox, cfg, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    paths = [make_task(root, "honest")] + [make(root) for make, _ in HOSTILE.values()]
    validator = Validator(_capped(cfg), admission=BOUNDS, generated=True)
    reports = validate_all(validator, paths, concurrency=4, show_progress=False)
    return {Path(r.task).name: r for r in reports}


def test_the_honest_task_in_the_batch_is_admitted(verdicts):
    assert verdicts["honest"].valid, [str(r) for r in verdicts["honest"].reasons]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_proposal_gets_its_own_reason(verdicts, name):
    report = verdicts[name]
    codes = sorted({r.code for r in report.reasons})
    assert codes == HOSTILE[name][1], [str(r) for r in report.reasons]
    assert all(r.message for r in report.reasons)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_proposal_ends_in_bounded_time(verdicts, name):
    assert verdicts[name].seconds < CASE_SECONDS


def test_bounds_and_warnings_are_told(verdicts):
    assert any("admission.max_reference_sec" in n for n in verdicts["endless_reference"].notes)
    assert any("admission.max_build_sec" in n for n in verdicts["long_declared_build"].notes)
    assert any("Harbor counts that as below 0.5" in n for n in verdicts["nop_waits_out_a_short_timeout"].notes)
    assert "zz-armed.pth imports armed_hook" in verdicts["armed_pth"].reasons[0].message
    assert "/tmp/.rc" in verdicts["armed_profile"].reasons[0].message
    assert "\\xff\\xfe" in verdicts["symlink_named_not_utf8"].reasons[0].message


def test_a_task_name_cannot_escape_into_the_host(verdicts):
    assert not Path("/tmp/aes-escaped").exists()


@pytest.mark.parametrize("path", ["../../etc/cron.d/x", "/etc/passwd", "tests/../../x", "elsewhere/file"])
def test_proposed_file_paths_stay_inside_the_task(path):
    with pytest.raises(DraftError, match="not inside the task layout"):
        parse_files(f'<file path="{path}">\nhello\n</file>\n')


# -- what the attacks earned with the defence off (a trial runs no admission check) ----------------

class Planter:
    """A solver episode that does no work and only writes ``files`` (path -> bytes) into the container."""

    name = "planter"

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def run(self, task, container, timeout):
        container.put_archive(tar_entries(self.files))
        return AgentRun(exit_code=0)


@pytest.fixture(scope="module")
def trials(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


@pytest.mark.parametrize("table", ["verifier.env", "environment.env"])
def test_a_bash_env_in_task_toml_earned_1_for_a_solver_that_did_no_work(trials, tmp_path, table):
    path = _env_table(table, "BASH_ENV", "/app/hook.sh")(tmp_path)
    task = load_task(path)
    cheat = trials.run(task, Planter({"app/hook.sh": b"echo 1 > /logs/verifier/reward.txt; exit 0\n"}))
    assert (cheat.outcome, cheat.reward) == (Outcome.OK, 1.0)  # before: the attack pays
    assert trials.run(task, NopAgent()).reward == 0.0
    verdict = Validator(trials.cfg).validate(path)
    assert [r.code for r in verdict.reasons] == ["static.startup_env.BASH_ENV"]  # after: never admitted


def test_a_hook_baked_into_the_image_and_armed_by_the_reference_earned_1(trials, tmp_path):
    """The tests cannot pass; the image's .pth imports a module that the reference (or any solver)
    writes into /app. Without the image inspection the task was valid, and a solver that only armed
    the hook earned 1."""
    path = _armed_pth(tmp_path)
    task = load_task(path)
    assert trials.run(task, OracleAgent()).reward == 1.0
    assert trials.run(task, NopAgent()).reward == 0.0
    cheat = trials.run(task, Planter(ARMING))
    assert (cheat.outcome, cheat.reward) == (Outcome.OK, 1.0)
    verdict = Validator(trials.cfg).validate(path)
    assert [r.code for r in verdict.reasons] == ["build.startup_hook"]


def test_a_prebuilt_image_is_inspected_like_a_built_one(trials, sandbox, tmp_path):
    """Outside a run (``aes validate`` of an external task) a docker_image task is allowed: the image
    it names gets the same inspection. aes-base itself is clean; an image with an armed hook is not."""
    armed = make_task(tmp_path, "armed-source", dockerfile=ARMED_DOCKERFILE)
    build = sandbox.build(load_task(armed))
    assert build.image
    clean = make_task(tmp_path, "prebuilt-clean", toml=TOML + 'docker_image = "aes-base:bookworm"\nworkdir = "/app"\n',
                      solve="mkdir -p /app && echo 42 > /app/answer.txt\n")
    hooked = make_task(tmp_path, "prebuilt-hooked", toml=TOML + f'docker_image = "{build.image}"\n')
    validator = Validator(trials.cfg)
    assert validator.validate(clean).valid, [str(r) for r in validator.validate(clean).reasons]
    assert "build.startup_hook" in [r.code for r in validator.validate(hooked).reasons]


def test_build_caps_fail_what_passed_without_them(cfg, tmp_path):
    """A step that starts 300 processes and one that takes 600 MiB built fine with no caps (what aes did
    before); under caps of 128 processes and 256 MiB each fails with the cap named."""
    from aes.sandbox.images import ImageBuilder

    spawn = "FROM python:3.12-slim\nRUN for i in $(seq 1 300); do sleep 2 & done; wait; echo {}\n"
    hog = "FROM python:3.12-slim\nRUN python3 -c \"b = bytearray(600 << 20); print(len(b), {})\"\n"
    off = ImageBuilder(dataclasses.replace(cfg.sandbox, build_pids_limit=0, build_memory_mb=0, build_cpus=0))
    capped = ImageBuilder(dataclasses.replace(cfg.sandbox, build_pids_limit=128, build_memory_mb=256, build_cpus=1.0))
    assert capped.cgroup_version, "the process cap needs the engine's cgroups on this host"
    nonce = os.urandom(4).hex()
    for name, dockerfile, code in (("spawn", spawn, "build.process_limit"), ("hog", hog, "build.memory_limit")):
        before = off.build(load_task(make_task(tmp_path, f"{name}-off", dockerfile=dockerfile.format(f"'{nonce}-0'"))))
        assert before.image, before.reason
        off.client.images.remove(before.image, force=True)
        after = capped.build(load_task(make_task(tmp_path, f"{name}-on", dockerfile=dockerfile.format(f"'{nonce}-1'"))))
        assert after.image is None and after.reason.code == code, after.reason
    quota = capped.build(load_task(make_task(tmp_path, "quota", dockerfile=(
        f"FROM python:3.12-slim\nRUN echo quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) {nonce}\n"))))
    assert quota.image and "quota=100000" in quota.log_tail
    capped.client.images.remove(quota.image, force=True)


def test_aes_validate_gives_each_task_of_a_mixed_directory_a_verdict(tmp_path):
    """The command over a directory of good and hostile tasks: every task gets its verdict, the good
    ones stay valid, and the command exits 1 (some are invalid) rather than crashing."""
    root = tmp_path / "mixed"
    good = [make_task(root, "honest"), make_task(root, "honest-two", solve="echo 42 > /app/answer.txt; true\n")]
    bad = {"reference_overfills_storage": "oracle.storage_exceeded", "nested_reward": "oracle.bad_reward_file",
           "nop_hangs": "nop.verifier_timeout", "env_verifier_bash_env": "static.startup_env.BASH_ENV",
           "armed_pth": "build.startup_hook", "names_not_utf8": None}
    for name in bad:
        HOSTILE[name][0](root)
    out = tmp_path / "verdicts.json"
    sets = ["admission.nop_verifier_floor_sec=5", "admission.max_verifier_sec=20", "admission.max_reference_sec=20"]
    proc = subprocess.run([sys.executable, "-m", "aes.cli", "validate", str(root), "--quiet", "--json", str(out),
                           *[a for s in sets for a in ("--set", s)]], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    verdicts = {Path(v["task"]).name: v for v in json.loads(out.read_text())}
    assert sorted(verdicts) == sorted([p.name for p in good] + list(bad))
    for path in good:
        assert verdicts[path.name]["valid"], verdicts[path.name]["reasons"]
    for name, code in bad.items():
        codes = [r.split(":")[0] for r in verdicts[name]["reasons"]]
        assert codes == ([code] if code else []), (name, verdicts[name]["reasons"])
