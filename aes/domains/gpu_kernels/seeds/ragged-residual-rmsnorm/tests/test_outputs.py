"""Tests of a GPU-kernel task: ModelNew in /app/solution.py against the eager reference.

Sections (WEIGHTS): ``correct`` - ModelNew matches the tests' own copy of reference.Model (public/, the same file as /app/reference.py) on every
case of cases.py in float32 and float16 (tolerances in TOL), leaves its inputs untouched and never
yields NaN where the reference does not; ``triton`` - each forward launches a ``@triton.jit`` kernel
defined in solution.py (seen by wrapping Triton's launch, on the GPU and in the interpreter alike),
and neither calls the reference nor does the math with eager torch ops (cases.FORBIDDEN, seen by a
TorchFunctionMode). The gate (test_gate_*) - solution.py imports and ModelNew runs on the
reference's default inputs with the right shape - earns nothing itself: if it fails the reward is 0,
so the untouched stub (it raises NotImplementedError) scores 0. On a GPU, test_timing times ModelNew
against the eager reference and reports the ratio (never credited); without one it is skipped and
says so (timing_skipped = 1 in reward.json).
"""
import contextlib
import importlib.util
import json
import os
import sys

import pytest
import torch
from torch.overrides import TorchFunctionMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "public")]  # cases.py; public/: the tests' copy of reference.py
import cases  # noqa: E402
import reference  # noqa: E402

APP = os.environ.get("KERNEL_APP", "/app")
EXTRA = os.environ.get("KERNEL_EXTRA", "/logs/verifier/extra.json")
WEIGHTS = {"correct": 0.6, "triton": 0.4}
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "cuda"
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
TOL = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}, torch.float16: {"atol": 1e-2, "rtol": 1e-2}}


@pytest.fixture(scope="module")
def solution():
    spec = importlib.util.spec_from_file_location("solution", os.path.join(APP, "solution.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    spec.loader.exec_module(module)
    return module


def _models(solution, init):
    ref = reference.Model(*init).to(DEVICE)
    new = solution.ModelNew(*init).to(DEVICE)
    new.load_state_dict(ref.state_dict())
    return ref.eval(), new.eval()


class _Calls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _launches():
    """Every launch of a Triton kernel while inside: the launched Python functions."""
    import triton.runtime.jit as jit

    seen, patched = [], []
    targets = [jit.JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction
        targets.append(InterpretedFunction)
    for cls in targets:
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            if not kwargs.get("warmup"):
                seen.append(self.fn)
            return __original(self, *args, **kwargs)

        cls.run = run
        patched.append((cls, original))
    try:
        yield seen
    finally:
        for cls, original in patched:
            cls.run = original


def _extra(**values):
    data = json.load(open(EXTRA)) if os.path.exists(EXTRA) else {}
    data.update(values)
    with open(EXTRA, "w") as f:
        json.dump(data, f)


def test_gate_runs(solution):
    ref, new = _models(solution, reference.get_init_inputs())
    inputs = reference.get_inputs(device=DEVICE)
    out = new(*inputs)
    assert isinstance(out, torch.Tensor) and out.shape == ref(*inputs).shape


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("case", cases.CASES, ids=[c["name"] for c in cases.CASES])
def test_correct_case(solution, case, dtype):
    ref, new = _models(solution, case["init"])
    inputs = reference.get_inputs(**case["inputs"], dtype=dtype, device=DEVICE)
    before = [t.clone() for t in inputs]
    with torch.no_grad():
        expected = ref(*inputs)
        out = new(*inputs)
    for arg, kept in zip(inputs, before):
        torch.testing.assert_close(arg, kept, equal_nan=True, msg="ModelNew changed its inputs")
    assert out.dtype == expected.dtype and out.shape == expected.shape
    torch.testing.assert_close(out.float().cpu(), expected.float().cpu(), **TOL[dtype])


def test_triton_kernel_launched(solution):
    ref, new = _models(solution, reference.get_init_inputs())
    inputs = reference.get_inputs(device=DEVICE)
    with _launches() as seen, torch.no_grad():
        new(*inputs)
    own = [fn for fn in seen if getattr(fn, "__module__", None) == "solution"]
    assert own, f"no @triton.jit kernel of solution.py was launched (launched: {seen})"


def test_triton_no_eager_math(solution, monkeypatch):
    ref, new = _models(solution, reference.get_init_inputs())
    inputs = reference.get_inputs(device=DEVICE)
    called = []
    monkeypatch.setattr(reference.Model, "forward", lambda *a, **k: called.append(1) or 1 / 0)
    with _Calls() as calls, torch.no_grad():
        new(*inputs)
    assert not called, "ModelNew calls the reference"
    used = sorted(calls.names & set(cases.FORBIDDEN))
    assert not used, f"ModelNew does the math with eager torch ops: {used}"


def test_timing(solution):
    if DEVICE != "cuda":
        _extra(timing_skipped=1)
        pytest.skip("timing skipped: no GPU (kernels ran in Triton's interpreter on the CPU); not credited")
    import triton.testing

    ref, new = _models(solution, cases.TIMING["init"])
    inputs = reference.get_inputs(**cases.TIMING["inputs"], dtype=torch.float16, device=DEVICE)
    with torch.no_grad():
        eager = triton.testing.do_bench(lambda: ref(*inputs))
        kernel = triton.testing.do_bench(lambda: new(*inputs))
    _extra(timing_skipped=0, eager_ms=eager, kernel_ms=kernel, time_ratio=kernel / eager)
    print(f"timing: kernel {kernel:.4f} ms, eager {eager:.4f} ms, ratio {kernel / eager:.3f}")
