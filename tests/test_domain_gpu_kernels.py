"""The GPU-kernel domain (domain=gpu_kernels): config, proposer instructions, the base image recipe
shared by the seeds, the seeds' shared tests and gated, section-weighted reward, the GPU decision of
aes/sandbox/gpu.py, the domain check that the tests never run the solution in their own process, and
in Docker a seed's oracle (1.0), do-nothing (0), two cheats (a dummy kernel beside eager math, eager
math alone) and a forger (it tries to write the reward at import and keeps trying from a process
it leaves behind: 0) through Triton's interpreter; on a GPU host (``gpu``) the seed's timed path
and its kernel/eager ratio."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from aes.config import compose_config
from aes.domains import instructions_dir, seeds_dir
from aes.domains.gpu_kernels.checks import CODE, checks
from aes.sandbox.gpu import plan
from aes.tasks import check_task, find_tasks, load_task
from aes.tasks.static import dockerfile_instructions

REPO = Path(__file__).resolve().parents[1]
DOMAIN = REPO / "aes" / "domains" / "gpu_kernels"
SEEDS = DOMAIN / "seeds"
RMSNORM = SEEDS / "ragged-residual-rmsnorm"
SEED_DIRS = find_tasks([SEEDS])
KIT = REPO / "aes" / "domains" / "kit" / "untrusted.py"


def _base() -> list[tuple[str, str]]:
    return [(word, args) for word, args, _ in dockerfile_instructions((DOMAIN / "base" / "Dockerfile").read_text())]


def test_config_composes_with_the_reset_check_and_nop_zero():
    cfg = compose_config(["domain=gpu_kernels"])
    assert cfg.domain.name == "gpu_kernels" and cfg.domain.reset_check is True and cfg.domain.nop_zero is True
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} == {"task_format.md", "what_to_build.md"}


def test_task_format_documents_the_base_image_lines_verbatim():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for word, args in _base():
        assert f"{word} {args}" in text
    for words in ("TRITON_INTERPRET=1", "NotImplementedError", "FORBIDDEN", "tests/public/reference.py",
                  "instructions/kit/untrusted.py", "gpu_kernels.tests_import_solution"):
        assert words in text


def test_base_image_pins_torch_triton_and_numpy():
    text = (DOMAIN / "base" / "Dockerfile").read_text()
    for pin in ("torch==2.13.0", "triton==3.7.1", "numpy==2.4.6", "--no-cache-dir"):
        assert pin in text


def test_at_least_four_seeds_that_pass_the_static_checks():
    assert len(SEED_DIRS) >= 4
    for path in SEED_DIRS:
        assert check_task(load_task(path)) == [], path.name


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_layout_base_recipe_and_shared_tests(path):
    lines = [(word, args) for word, args, _ in dockerfile_instructions((path / "environment" / "Dockerfile").read_text())]
    assert lines[:len(_base())] == _base()
    assert lines[len(_base()):] == [("COPY", "reference.py solution.py /app/")]
    assert (path / "tests" / "public" / "reference.py").read_bytes() == (path / "environment" / "reference.py").read_bytes()
    for name in ("test_outputs.py", "test.sh"):
        assert (path / "tests" / name).read_bytes() == (RMSNORM / "tests" / name).read_bytes(), name
    assert (path / "tests" / "untrusted.py").read_bytes() == KIT.read_bytes()
    assert "raise NotImplementedError" in (path / "environment" / "solution.py").read_text()
    assert "@triton.jit" in (path / "solution" / "solution.py").read_text()
    cases = (path / "tests" / "cases.py").read_text()
    assert "CASES = [" in cases and "FORBIDDEN = [" in cases and "TIMING = {" in cases
    assert "TRITON_INTERPRET=1" in (path / "instruction.md").read_text()


def test_reward_is_gated_and_weighted_by_section():
    source = (RMSNORM / "tests" / "test_outputs.py").read_text()
    weights = ast.literal_eval(re.search(r"^WEIGHTS = (\{.*?\})$", source, re.M | re.S).group(1))
    assert weights == {"correct": 0.4, "triton": 0.6}  # eager math alone (correct, no kernel) earns 0.4
    tests = re.findall(r"^def (test_\w+)", source, re.M)
    assert tests[0] == "test_gate_runs" and {"test_timing_within_threshold", "test_correct_case"} <= set(tests)
    assert all(t.split("_")[1] in (*weights, "gate", "timing") for t in tests), tests


@pytest.mark.parametrize("requested, available, count, note", [
    (None, 0, 0, "gpu: not requested"), (0, 4, 0, "gpu: not requested"), (1, 0, 0, "gpu: none"),
    (2, 8, 2, "gpu: 2"), (4, 1, 1, "gpu: 1 of 4 requested")])
def test_gpu_plan(requested, available, count, note):
    decided = plan(requested, available)
    assert (decided.count, decided.note) == (count, note)
    assert len(decided.device_requests()) == (1 if count else 0)
    if count:
        assert decided.device_requests()[0].count == count


def test_gpu_plan_rejects_a_negative_count():
    with pytest.raises(ValueError):
        plan(-1, 1)


def test_the_seeds_tests_never_import_the_solution():
    """The domain check admits the seeds; their tests reach solution.py only through the kit's
    child (the parent reads it as text) and pass the reference's state and inputs to it."""
    for path in SEED_DIRS:
        assert checks(path) == [], path.name
        source = (path / "tests" / "test_outputs.py").read_text()
        tree = ast.parse(source)
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "solution" not in imported and "importlib" not in imported and "untrusted" in imported
        assert "Untrusted([APP]" in source and "harness.run" in source


@pytest.mark.parametrize("damage, expected", [
    ("old", "spec_from_file_location"), ("kit", "not a byte copy"), ("exec", "exec"),
    ("test.sh", "names the solution")])
def test_the_check_rejects_tests_that_run_the_solution_in_process(tmp_path, damage, expected):
    path = tmp_path / "task"
    shutil.copytree(RMSNORM, path)
    tests = path / "tests"
    if damage == "old":  # the tests as they were: the solution imported by the pytest process itself
        (tests / "test_outputs.py").write_text(
            "import importlib.util\nspec = importlib.util.spec_from_file_location('solution', '/app/solution.py')\n")
    elif damage == "kit":
        (tests / "untrusted.py").write_text(KIT.read_text() + "\n# changed\n")
    elif damage == "exec":
        (tests / "conftest.py").write_text("exec(open('/app/solution.py').read())\n")
    else:
        (tests / "test.sh").write_text((tests / "test.sh").read_text() + "\npython3 -c 'import solution'\n")
    reasons = checks(path)
    assert [r.code for r in reasons] == [CODE] and expected in reasons[0].message, reasons


def _variant(tmp_path: Path, name: str, solution: str) -> Path:
    path = tmp_path / name
    shutil.copytree(RMSNORM, path)
    (path / "solution" / "solution.py").write_text(solution)
    return path


_DUMMY_KERNEL = '''
import torch, triton, triton.language as tl
from torch import nn
import importlib.util
spec = importlib.util.spec_from_file_location("app_reference", "/app/reference.py")
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)

@triton.jit
def _touch(p):
    pass

class ModelNew(ref.Model):
    def forward(self, x, residual, lengths):
        {launch}
        return super().forward(x, residual, lengths)
'''


@pytest.mark.docker
@pytest.mark.slow
def test_oracle_nop_and_cheats_through_the_interpreter(sandbox, cfg, tmp_path):
    """The reference earns 1.0 and says the timing was skipped; doing nothing earns 0; eager math
    beside a dummy kernel, and eager math alone, earn only the correct section (0.4: the triton
    section counts whole, and the kernel neither computes nor keeps eager math out)."""
    from aes.sandbox import NopAgent, OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    dummy = _variant(tmp_path, "dummy", _DUMMY_KERNEL.replace("{launch}", "_touch[(1,)](x)"))
    eager = _variant(tmp_path, "eager", _DUMMY_KERNEL.replace("{launch}", "pass"))
    results = {}
    for label, path, agent in (("oracle", RMSNORM, OracleAgent()), ("nop", RMSNORM, NopAgent()),
                               ("dummy", dummy, OracleAgent()), ("eager", eager, OracleAgent())):
        task = load_task(path)
        build = runner.sandbox.build(task)
        assert build.image, build.reason
        results[label] = runner.run(task, agent, build.image)
    assert {k: r.reward for k, r in results.items()} == {"oracle": 1.0, "nop": 0.0, "dummy": 0.4, "eager": 0.4}, \
        {k: (r.reward, r.detail, r.verifier_output[-2000:]) for k, r in results.items()}
    assert results["oracle"].rewards == {"reward": 1.0}
    out = results["oracle"].verifier_output
    assert "gpu: none" in out and "timing skipped" in out


_FORGER = '''
"""A forger: at import it writes reward 1 and an all-pass junit.xml, registers an atexit doing it
again, tries to edit and read the tests and leaves a process rewriting reward.json for 30 s; its
ModelNew returns zeros."""
import atexit, json, os, subprocess, sys
import torch
from torch import nn

LOGS = "/logs/verifier"
JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" '
         'skipped="0" tests="4"><testcase classname="test_outputs" name="test_gate_runs"/>'
         '<testcase classname="test_outputs" name="test_correct_case[default-fp32]"/>'
         '<testcase classname="test_outputs" name="test_triton_kernel_launched"/>'
         '<testcase classname="test_outputs" name="test_triton_no_eager_math"/></testsuite></testsuites>')
DAEMON = f"""
import json, time
end = time.time() + 30
while time.time() < end:
    for path, text in (("{LOGS}/reward.json", json.dumps({{"reward": 1.0}})), ("{LOGS}/junit.xml", {JUNIT!r})):
        try:
            with open(path, "w") as f:
                f.write(text)
        except Exception:
            pass
    time.sleep(0.1)
"""


def _try(what, fn):
    try:
        fn()
        print(f"forger: {what}: done", file=sys.stderr)
    except Exception as exc:
        print(f"forger: {what}: {exc!r}", file=sys.stderr)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _forge():
    _try("reward.json", lambda: _write(f"{LOGS}/reward.json", json.dumps({"reward": 1.0})))
    _try("junit.xml", lambda: _write(f"{LOGS}/junit.xml", JUNIT))
    _try("extra.json", lambda: _write(f"{LOGS}/extra.json", json.dumps({"timing_skipped": 0, "time_ratio": 0.01})))


_forge()
atexit.register(_forge)
_try("edit the tests", lambda: open("/tests/test_outputs.py", "a").write("\\nimport pytest\\npytest.skip(allow_module_level=True)\\n"))
_try("read the tests", lambda: open("/tests/cases.py").read())
_try("daemon", lambda: subprocess.Popen([sys.executable, "-c", DAEMON], start_new_session=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))

    def forward(self, x, residual, lengths):
        return torch.zeros_like(x)
'''


@pytest.mark.docker
@pytest.mark.slow
def test_a_forging_solution_earns_nothing(sandbox, cfg, tmp_path):
    """solution.py tries to forge the reward from inside the verifier (reward.json, junit.xml and
    extra.json at import and at exit, the tests edited, a process left rewriting reward.json): it
    runs as uid 64999 in the tests' child, so every write is refused, and its zeros earn 0."""
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    task = load_task(_variant(tmp_path, "forger", _FORGER))
    build = runner.sandbox.build(task)
    assert build.image, build.reason
    result = runner.run(task, OracleAgent(), build.image)
    out = result.verifier_output
    assert result.reward == 0.0 and result.rewards == {"reward": 0.0}, (result.reward, result.detail, out[-3000:])
    # the gate passed (the forger's ModelNew, imported in the child, ran and returned zeros), the rest failed
    assert "gpu: none" in out and "_ test_gate_runs _" not in out and "_ test_correct_case[" in out, out[-3000:]


@pytest.mark.docker
@pytest.mark.gpu
def test_timed_path_on_a_gpu_host(sandbox, cfg, tmp_path):
    """On a host with an NVIDIA GPU: the seed's reference kernel compiled by Triton, timed against
    the eager reference; prints the kernel/eager time ratio (paper App. C.3: 0.11-0.34 on a T4)."""
    import docker

    decided = plan(1)
    if not decided.count:
        pytest.skip(decided.note)
    task = load_task(RMSNORM)
    build = sandbox.build(task)
    assert build.image, build.reason
    logs = tmp_path / "verifier"
    logs.mkdir()
    output = docker.from_env().containers.run(
        build.image, ["bash", "-c", "cp -r /tests-ro /tests && cp /solution/solution.py /app/solution.py && bash /tests/test.sh"],
        volumes={str(RMSNORM / "tests"): {"bind": "/tests-ro", "mode": "ro"},
                 str(RMSNORM / "solution"): {"bind": "/solution", "mode": "ro"},
                 str(logs): {"bind": "/logs/verifier", "mode": "rw"}},
        device_requests=decided.device_requests(), network_mode="none", remove=True).decode()
    reward = json.loads((logs / "reward.json").read_text())
    print(output[-3000:])
    print(f"kernel/eager time ratio: {reward.get('time_ratio')}")
    assert reward["reward"] == 1.0 and reward.get("time_ratio", 0) > 0, output[-3000:]


# -- wrong work: eager math, a kernel that only copies what eager math computed, a kernel that misses
# the padding; the eager-only probe --------------------------------------------------------------------
SOFTMAX = SEEDS / "masked-softmax"
COPY_KERNEL = '''"""Eager math with ops that are on no blocklist, then a Triton kernel that only copies the result."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < n
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=keep), mask=keep)


class ModelNew(nn.Module):
    def __init__(self, scale: float = 0.125):
        super().__init__()
        self.scale = scale

    def forward(self, x, lengths):
        B, L = x.shape
        live = torch.arange(L, device=x.device)[None, :] < lengths[:, None]
        s = x.float() * self.scale
        s[~live] = -1e30
        e = torch.pow(2.718281828459045, s - torch.topk(s, 1, dim=-1).values)
        e[~live] = 0.0
        total = torch.cumsum(e, dim=-1)[:, -1:]
        total[total == 0] = 1.0
        p = (e * total.reciprocal()).to(x.dtype).contiguous()
        out = torch.empty_like(p)
        _copy[(triton.cdiv(p.numel(), 1024),)](p, out, p.numel(), BLOCK=1024)
        return out
'''


@pytest.mark.docker
@pytest.mark.slow
def test_wrong_kernels_earn_under_half_and_the_eager_probe_rejects_a_seed_that_pays_for_eager_math(sandbox, cfg,
                                                                                                    tmp_path):
    """On masked-softmax: the reference's eager code as ModelNew (0.4), eager math with ops on no
    blocklist plus a kernel that only copies its result (1.0 before the replay test; 0.4 now: the
    launches alone, on perturbed inputs, give the first output again) and the reference's kernel with
    the padding read as scores (0: not correct); the eager-only probe gives the seed no reason and
    rejects a variant with the weights it had (correct 0.6)."""
    from aes.domains.gpu_kernels.checks import EagerOnly, eager_reasons
    from aes.sandbox import OracleAgent, TrialRunner

    runner = TrialRunner(cfg.sandbox, sandbox)
    reference_kernel = (SOFTMAX / "solution" / "solution.py").read_text()
    assert "    live = cols < n\n" in reference_kernel
    wrong = {"eager-only": (SOFTMAX / "environment" / "reference.py").read_text().replace("class Model(", "class ModelNew("),
             "copy-kernel": COPY_KERNEL,
             "padding-read": reference_kernel.replace("    live = cols < n\n", "    live = cols < L\n")}
    rewards = {}
    for name, solution in wrong.items():
        path = tmp_path / name
        shutil.copytree(SOFTMAX, path)
        (path / "solution" / "solution.py").write_text(solution)
        task = load_task(path)
        build = runner.sandbox.build(task)
        assert build.image, build.reason
        result = runner.run(task, OracleAgent(), build.image)
        rewards[name] = (result.reward, result.verifier_output)
    print({k: v[0] for k, v in rewards.items()})
    assert {k: v[0] for k, v in rewards.items()} == {"eager-only": 0.4, "copy-kernel": 0.4, "padding-read": 0.0}, \
        {k: (v[0], v[1][-1500:]) for k, v in rewards.items()}
    copy = rewards["copy-kernel"][1]  # every test but the replay passed: the static reading and the watch saw nothing
    assert " test_triton_kernel_computes_the_output _" in copy and "1 failed, 11 passed" in copy, copy[-3000:]
    paid = tmp_path / "paid"
    shutil.copytree(SOFTMAX, paid)
    tests = paid / "tests" / "test_outputs.py"
    tests.write_text(tests.read_text().replace('WEIGHTS = {"correct": 0.4, "triton": 0.6}', 'WEIGHTS = {"correct": 0.6, "triton": 0.4}'))
    found = {}
    for name, path in (("seed", SOFTMAX), ("paid", paid)):
        task = load_task(path)
        build = runner.sandbox.build(task)
        trial = runner.run(task, EagerOnly(), build.image)
        found[name] = (trial.reward, [r.code for r in eager_reasons(trial)])
    assert found == {"seed": (0.4, []), "paid": (0.6, ["gpu_kernels.eager_rewarded"])}, found
