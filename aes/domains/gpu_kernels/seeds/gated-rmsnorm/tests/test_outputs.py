"""Tests of a GPU-kernel task: ModelNew in /app/solution.py against the eager reference.

The agent's code never runs in this process, which decides the reward: ModelNew is built and run in
a child process as an unprivileged user (tests/untrusted.py, a copy of aes/domains/kit/untrusted.py)
by HARNESS below, and only plain values come back (tensors as raw bytes). This process computes the
expected outputs itself with the tests' own copy of reference.Model (public/, the same file as
/app/reference.py) on the inputs it draws, sends the child the reference's state_dict and those
inputs, and compares what comes back. It reads solution.py only as text (``ast``), never imports it.

Correctness gates everything: the gate (test_gate_*: ModelNew builds and returns a tensor of the
reference's shape on the default inputs) and every ``correct`` test - ModelNew matches the reference
on every case of cases.py in float32 and float16 (tolerances in TOL), leaves its inputs untouched and
never yields NaN where the reference does not - must pass, or the reward is 0 (the untouched stub
raises NotImplementedError: 0). Then the sections earn their weight times the share of their tests
that pass (WEIGHTS without a GPU, GPU_WEIGHTS with one): ``correct``; ``triton``, all or nothing -
solution.py
defines a ``@triton.jit`` function and the child sees one of them launched by the forward
(test_triton_kernel_launched), that forward launches one while neither solution.py's text outside
its kernels (parsed here: _Shown) nor what the child watches (a TorchFunctionMode) uses the
reference, code loaded at run time or an eager op of cases.FORBIDDEN (test_triton_no_eager_math),
and the forward's Triton launches, run again on perturbed inputs with everything eager math computed
kept from the first inputs, give the reference's output on the perturbed inputs
(test_triton_kernel_computes_the_output: what the kernels computed, not which ops the source
names); ``timing`` (a GPU only, and only once every ``triton`` test passes) - the kernel takes at
most cases.TIMING["max_ratio"] (the paper's 0.7; 0.6 for an aggregate limit) of the eager
reference's time on the timed shape. Eager math alone earns 0.4 without a GPU and 0.25 with one.
Without a GPU the timing is skipped and says so (timing_skipped = 1 in extra.json, written by this
process only).
"""
import ast
import json
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "public")]  # cases.py, untrusted.py; public/: the tests' copy of reference.py
import cases  # noqa: E402
import reference  # noqa: E402
from untrusted import Untrusted  # noqa: E402

APP = os.environ.get("KERNEL_APP", "/app")
EXTRA = os.environ.get("KERNEL_EXTRA", "/logs/verifier/extra.json")
WEIGHTS = {"correct": 0.4, "triton": 0.6}
GPU_WEIGHTS = {"correct": 0.25, "triton": 0.45, "timing": 0.3}
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "cuda"
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
TOL = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}, torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
TIMEOUT = 300  # seconds per call into the child
with open(os.path.join(HERE, "public", "reference.py")) as _f:
    REFERENCE_SOURCE = _f.read()  # the child draws the timed inputs from this copy, not /app's

HARNESS = r'''
"""Runs in the child, beside the agent's code: what it returns is the child's word, no more."""
import contextlib
import os
import sys

import torch
from torch.overrides import TorchFunctionMode


def _model(init, state, device):
    import solution

    new = solution.ModelNew(*init).to(device)
    new.load_state_dict(state)
    return new.eval()


def _args(inputs, device):
    """The inputs as the tests drew them: each tensor a view of its own storage (offset, size, stride kept)."""
    out = []
    for value in inputs:
        if isinstance(value, dict) and set(value) == {"storage", "offset", "size", "stride"}:
            value = value["storage"].to(device).as_strided(value["size"], value["stride"], value["offset"])
        out.append(value)
    return out


def _plain(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().as_subclass(torch.Tensor)
    return "not a tensor: " + type(value).__name__


def run(init, state, inputs, device):
    """ModelNew(*init) with the reference's state on the inputs: (its output, the inputs afterwards)."""
    new, args = _model(init, state, device), _args(inputs, device)
    with torch.no_grad():
        out = new(*args)
    return _plain(out), [_plain(a) for a in args]


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


def launched(init, state, inputs, device):
    """The names of solution.py's functions whose Triton launch one forward went through."""
    new, args = _model(init, state, device), _args(inputs, device)
    with _launches() as seen, torch.no_grad():
        new(*args)
    return sorted({str(getattr(fn, "__name__", "?")) for fn in seen if getattr(fn, "__module__", None) == "solution"})


class _Calls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def eager_calls(init, state, inputs, device, app):
    """One forward with the reference's forward (``app``/reference.py's Model) made to fail, every
    torch call and Triton launch recorded: {"called_reference", "calls" (torch function names),
    "launched" (as launched() gives), "error" (what the forward raised, or None)}."""
    new, args = _model(init, state, device), _args(inputs, device)
    called, patched = [], []
    path = os.path.realpath(os.path.join(app, "reference.py"))
    with contextlib.suppress(Exception):
        import reference  # noqa: F401
    for module in list(sys.modules.values()):
        model = getattr(module, "Model", None)
        if isinstance(model, type) and os.path.realpath(str(getattr(module, "__file__", "") or "")) == path:
            patched.append((model, model.forward))
            model.forward = lambda *a, **k: called.append(1) or 1 / 0
    error, calls, seen = None, _Calls(), []
    try:
        with _launches() as seen, calls, torch.no_grad():
            new(*args)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        for model, forward in patched:
            model.forward = forward
    own = sorted({str(getattr(fn, "__name__", "?")) for fn in seen if getattr(fn, "__module__", None) == "solution"})
    return {"called_reference": bool(called), "calls": sorted(calls.names), "launched": own, "error": error}


REPLAYED = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "contiguous", "view", "view_as",
    "reshape", "reshape_as", "as_strided", "expand", "expand_as", "permute", "transpose", "t", "flatten",
    "unflatten", "unsqueeze", "squeeze", "narrow", "select", "__getitem__", "split", "chunk", "unbind", "movedim",
    "to", "float", "half", "double", "bfloat16", "type", "type_as", "clone", "detach", "copy_", "__get__",
}
"""Torch functions that only allocate, lay out, cast or copy: replayed on the perturbed inputs. Any
other torch function is math, and the replay keeps what it computed from the first inputs."""


class _Record(TorchFunctionMode):
    """Every torch call of one forward (with a snapshot of what math returned) and every Triton
    launch, in order; calls made inside a launch (the interpreter's own) are not events."""

    def __init__(self):
        super().__init__()
        self.events, self.launching = [], False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.launching:
            name = getattr(func, "__name__", "")
            snap = None if name in REPLAYED else _snapshot(out)
            self.events.append(("torch", func, name, args, kwargs, out, snap))
        return out


def _snapshot(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def replayed(init, state, inputs, perturbed, device):
    """What the forward's torch layout calls and Triton launches alone compute from other inputs:
    one forward is recorded on ``inputs``; then the launches are run again, in order, on
    ``perturbed`` (inputs of the same layout and other values), with the layout, cast and allocation
    calls run again and every other torch call's result kept as it was computed from ``inputs``.
    A kernel that computes the output from its inputs gives the reference's output on ``perturbed``;
    one that copies what eager math computed gives the first output again."""
    import triton.runtime.jit as jit

    new, first, second = _model(init, state, device), _args(inputs, device), _args(perturbed, device)
    record, launches, patched = _Record(), [], []
    targets = [jit.JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction
        targets.append(InterpretedFunction)
    for cls in targets:
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            if kwargs.get("warmup") or record.launching:
                return __original(self, *args, **kwargs)
            record.events.append(("launch", self, __original, args, kwargs))
            record.launching = True
            try:
                return __original(self, *args, **kwargs)
            finally:
                record.launching = False

        cls.run = run
        patched.append((cls, original))
    try:
        with record, torch.no_grad():
            out = new(*first)
    finally:
        for cls, original in patched:
            cls.run = original
    if not isinstance(out, torch.Tensor):
        return "not a tensor: " + type(out).__name__
    bases = {a.untyped_storage().data_ptr(): b for a, b in zip(first, second) if isinstance(a, torch.Tensor)}
    mapping = {}

    def sub(value):
        if isinstance(value, torch.Tensor):
            if id(value) in mapping:
                return mapping[id(value)]
            base = bases.get(value.untyped_storage().data_ptr())
            if base is not None:  # a view of one of the inputs
                return torch.as_strided(base, value.size(), value.stride(), value.storage_offset())
            return value  # a parameter, or a tensor made before the forward
        if isinstance(value, (list, tuple)):
            return type(value)(sub(v) for v in value)
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        return value

    def bind(result, now):
        if isinstance(result, torch.Tensor) and isinstance(now, torch.Tensor):
            mapping[id(result)] = now
        elif isinstance(result, (list, tuple)) and isinstance(now, (list, tuple)):
            for r, n in zip(result, now):
                bind(r, n)

    with torch.no_grad():
        for event in record.events:
            if event[0] == "launch":
                _, fn, original, args, kwargs = event
                original(fn, *sub(args), **sub(kwargs))
            else:
                _, func, name, args, kwargs, result, snap = event
                bind(result, func(*sub(args), **sub(kwargs)) if snap is None else snap)
    return {"output": _plain(sub(out)), "launches": sum(e[0] == "launch" for e in record.events)}


def time_kernel(init, state, shape, device):
    """Milliseconds per forward (triton.testing.do_bench) on the timed shape in float16, drawn by
    the tests' copy of the reference (tests_reference, handed over as text)."""
    import triton.testing
    import tests_reference

    new = _model(init, state, device)
    inputs = tests_reference.get_inputs(**shape, dtype=torch.float16, device=device)
    with torch.no_grad():
        return float(triton.testing.do_bench(lambda: new(*inputs)))
'''


class _Child:
    """The child running the agent's code (tests/untrusted.py), started again if a call killed it."""

    def __init__(self):
        self.untrusted = None

    def call(self, target, *args):
        if self.untrusted is None or self.untrusted.proc.poll() is not None:
            if self.untrusted is not None:
                self.untrusted.close()
            env = {"TRITON_INTERPRET": "1"} if DEVICE == "cpu" else {}
            if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
                env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
            self.untrusted = Untrusted([APP], timeout=TIMEOUT, env=env,
                                       helpers={"harness": HARNESS, "tests_reference": REFERENCE_SOURCE})
        return self.untrusted.call(target, *args)

    def close(self):
        if self.untrusted is not None:
            self.untrusted.close()


def _readable(root):
    """The child runs as another user: the agent's files must be readable by it (links left alone)."""
    if not os.path.isdir(root) or os.path.islink(root):
        return
    for path, dirs, files in os.walk(root):
        os.chmod(path, os.stat(path).st_mode | 0o005)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(path, d))]
        for name in files:
            entry = os.path.join(path, name)
            if not os.path.islink(entry) and os.path.isfile(entry):
                os.chmod(entry, os.stat(entry).st_mode | 0o004)


@pytest.fixture(scope="module")
def child():
    _readable(APP)
    running = _Child()
    try:
        yield running
    finally:
        running.close()


def _reference(init):
    return reference.Model(*init).to(DEVICE).eval()


def _state(ref):
    return {k: v.detach().cpu() for k, v in ref.state_dict().items()}


def _send(inputs):
    """Each tensor as its whole storage plus offset, size and stride, so strided views stay views."""
    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor):
            n = t.untyped_storage().nbytes() // t.element_size()
            out.append({"storage": t.detach().as_strided((n,), (1,), 0).cpu(), "offset": t.storage_offset(),
                        "size": tuple(t.shape), "stride": tuple(t.stride())})
        else:
            out.append(t)
    return out


def _run(child, init, inputs):
    ref = _reference(init)
    with torch.no_grad():
        expected = ref(*inputs)
    out, after = child.call("harness.run", init, _state(ref), _send(inputs), DEVICE)
    return expected, out, after


# --- solution.py read as text (never imported here) -------------------------------------------

DYNAMIC = {"importlib", "runpy", "__import__", "exec", "eval", "compile", "import_module",
           "spec_from_file_location", "module_from_spec", "exec_module", "SourceFileLoader"}
"""Names that load or run code this check cannot see (as attributes: all but exec, eval and compile,
which are method names elsewhere; torch.compile is one too)."""
DYNAMIC_ATTRS = DYNAMIC - {"exec", "eval", "compile"}
HIDDEN = {"globals", "vars", "locals", "__dict__", "__getattribute__", "attrgetter", "methodcaller", "modules",
          "numpy", "tolist"}
"""Ways around a reading by name (another name for an op, a module looked up at run time) and out of
torch (numpy, Python lists), where no TorchFunctionMode sees the math; getattr counts when the
attribute's name is not a string constant."""
REFERENCE_NAMES = {"reference", "Model"}


class _Shown:
    """What solution.py's text shows: its @triton.jit functions (``kernels``) and what, outside
    them, names the reference, dynamic code or an op of cases.FORBIDDEN (``problems``); inside a
    kernel, torch or the reference is a problem too."""

    def __init__(self, source):
        self.kernels, self.problems = [], []
        tree = ast.parse(source)
        self.triton, self.torch, self.jit = set(), set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    root = alias.name.split(".")[0]
                    (self.triton if root == "triton" else self.torch if root == "torch" else set()).add(bound)
            elif isinstance(node, ast.ImportFrom) and node.module:
                root = node.module.split(".")[0]
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if root == "triton":
                        (self.jit if alias.name == "jit" else self.triton).add(bound)
                    elif root == "torch":
                        self.torch.add(bound)
        self._visit(tree, kernel=False)

    def _is_jit(self, decorator):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            return target.id in self.jit
        return isinstance(target, ast.Attribute) and target.attr == "jit" and _root(target) in self.triton

    def _visit(self, node, kernel):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(self._is_jit, node.decorator_list)):
            self.kernels.append(node.name)
            for part in node.decorator_list + [node.args]:
                self._visit(part, kernel)
            for statement in node.body:
                self._visit(statement, kernel=True)
            return
        self._check(node, kernel)
        for child in ast.iter_child_nodes(node):
            self._visit(child, kernel)

    def _check(self, node, kernel):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in REFERENCE_NAMES | DYNAMIC | {"numpy", "operator"}:
                    self.problems.append(f"line {line}: imports {module}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
                for alias in node.names:
                    if alias.name in cases.FORBIDDEN or alias.name == "*":
                        self.problems.append(f"line {line}: imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Name):
            if node.id in REFERENCE_NAMES | DYNAMIC | HIDDEN:
                self.problems.append(f"line {line}: names {node.id}")
            elif kernel and node.id in self.torch:
                self.problems.append(f"line {line}: a kernel names torch ({node.id})")
        elif isinstance(node, ast.Attribute):
            if node.attr in REFERENCE_NAMES | DYNAMIC_ATTRS | HIDDEN or (node.attr == "compile" and _root(node) in self.torch):
                self.problems.append(f"line {line}: names .{node.attr}")
            elif node.attr in cases.FORBIDDEN and not kernel and _root(node) not in self.triton | {"math"}:
                self.problems.append(f"line {line}: eager op .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
            if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                self.problems.append(f"line {line}: {node.func.id} with a name computed at run time")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in REFERENCE_NAMES or "reference.py" in node.value or (
                    not kernel and node.value in cases.FORBIDDEN):
                self.problems.append(f"line {line}: the string {node.value[:60]!r}")


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


@pytest.fixture(scope="module")
def shown():
    with open(os.path.join(APP, "solution.py"), encoding="utf-8", errors="replace") as f:
        return _Shown(f.read())


def _extra(**values):
    data = json.load(open(EXTRA)) if os.path.exists(EXTRA) else {}
    data.update(values)
    with open(EXTRA, "w") as f:
        json.dump(data, f)


# --- the tests -----------------------------------------------------------------------------------

def test_gate_runs(child):
    expected, out, _ = _run(child, reference.get_init_inputs(), reference.get_inputs(device=DEVICE))
    assert isinstance(out, torch.Tensor) and out.shape == expected.shape, f"ModelNew returned {out!r:.200}"


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("case", cases.CASES, ids=[c["name"] for c in cases.CASES])
def test_correct_case(child, case, dtype):
    inputs = reference.get_inputs(**case["inputs"], dtype=dtype, device=DEVICE)
    before = [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    expected, out, after = _run(child, case["init"], inputs)
    assert isinstance(out, torch.Tensor), f"ModelNew returned {out!r:.200}"
    assert isinstance(after, list) and len(after) == len(before)
    for arg, kept in zip(after, before):
        if isinstance(kept, torch.Tensor):
            assert isinstance(arg, torch.Tensor), "ModelNew changed its inputs"
            torch.testing.assert_close(arg, kept, equal_nan=True, msg="ModelNew changed its inputs")
    assert out.dtype == expected.dtype and out.shape == expected.shape
    torch.testing.assert_close(out.float().cpu(), expected.float().cpu(), **TOL[dtype])


def test_triton_kernel_launched(child, shown):
    assert shown.kernels, "solution.py defines no @triton.jit function"
    init = reference.get_init_inputs()
    seen = child.call("harness.launched", init, _state(_reference(init)), _send(reference.get_inputs(device=DEVICE)),
                      DEVICE)
    assert isinstance(seen, list)
    own = [name for name in seen if name in shown.kernels]
    assert own, f"no @triton.jit kernel of solution.py ({shown.kernels}) was launched (launched: {seen})"


def test_triton_no_eager_math(child, shown):
    assert not shown.problems, f"solution.py outside its kernels: {shown.problems[:10]}"
    init = reference.get_init_inputs()
    seen = child.call("harness.eager_calls", init, _state(_reference(init)),
                      _send(reference.get_inputs(device=DEVICE)), DEVICE, APP)
    assert isinstance(seen, dict) and isinstance(seen.get("calls"), list) and isinstance(seen.get("launched"), list)
    assert not seen.get("called_reference"), "ModelNew calls the reference"
    assert seen.get("error") is None, f"the forward raised {seen.get('error')}"
    assert [name for name in seen["launched"] if name in shown.kernels], \
        f"the forward launched no @triton.jit kernel of solution.py ({shown.kernels}): its math is not a kernel's"
    used = sorted(set(seen["calls"]) & set(cases.FORBIDDEN))
    assert not used, f"ModelNew does the math with eager torch ops: {used}"


def _perturbed(inputs, seed=1234):
    """The same inputs with other floating-point values (integer tensors, NaNs and layouts kept)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            n = t.untyped_storage().nbytes() // t.element_size()
            storage = t.detach().as_strided((n,), (1,), 0).cpu().float()
            noise = torch.randn(storage.shape, generator=gen) * 0.5 + 0.25
            storage = (storage * (1.0 + 0.5 * torch.rand(storage.shape, generator=gen)) + noise).to(t.dtype)
            out.append(storage.to(t.device).as_strided(t.size(), t.stride(), t.storage_offset()))
        else:
            out.append(t)
    return out


def test_triton_kernel_computes_the_output(child, shown):
    """What the launched kernels compute, not only which ops the source names: the forward's Triton
    launches run again on perturbed inputs (what eager math computed on the first inputs kept as it
    was) must give the reference's output on those inputs."""
    assert shown.kernels, "solution.py defines no @triton.jit function"
    init = reference.get_init_inputs()
    inputs = reference.get_inputs(device=DEVICE)
    perturbed = _perturbed(inputs)
    ref = _reference(init)
    with torch.no_grad():
        expected = ref(*perturbed)
    got = child.call("harness.replayed", init, _state(ref), _send(inputs), _send(perturbed), DEVICE)
    assert isinstance(got, dict) and got.get("launches"), f"the forward launched no Triton kernel ({got!r:.200})"
    out = got.get("output")
    assert isinstance(out, torch.Tensor) and out.shape == expected.shape, f"the replay gave {out!r:.200}"
    torch.testing.assert_close(out.float().cpu(), expected.float().cpu(), equal_nan=True, **TOL[torch.float32],
                               msg="the launched kernels alone, on other inputs, do not compute the output: the "
                                   "math is done outside Triton")


def test_timing_within_threshold(child):
    if DEVICE != "cuda":
        _extra(timing_skipped=1)
        pytest.skip("timing skipped: no GPU (kernels ran in Triton's interpreter on the CPU); not credited")
    import triton.testing

    init = cases.TIMING["init"]
    limit = cases.TIMING.get("max_ratio", 0.7)
    ref = _reference(init)
    inputs = reference.get_inputs(**cases.TIMING["inputs"], dtype=torch.float16, device=DEVICE)
    with torch.no_grad():
        eager = float(triton.testing.do_bench(lambda: ref(*inputs)))
    del inputs
    torch.cuda.empty_cache()
    kernel = child.call("harness.time_kernel", init, _state(ref), cases.TIMING["inputs"], DEVICE)
    assert isinstance(kernel, float) and kernel > 0, f"the child timed {kernel!r}"
    _extra(timing_skipped=0, eager_ms=eager, kernel_ms=kernel, time_ratio=kernel / eager, max_ratio=limit)
    print(f"timing: kernel {kernel:.4f} ms, eager {eager:.4f} ms, ratio {kernel / eager:.3f} (at most {limit})")
    assert kernel <= limit * eager, f"the kernel takes {kernel / eager:.2f} of the eager time (at most {limit})"
