"""Admission checks of the professional-work domain, run after checks 1-4 and the reset check.

A task hands the solver read-only inputs and asks for deliverables, files a professional would
hand over (a workbook with live formulas, a CSV, a PDF memo). task.toml names both:

```toml
[metadata]
inputs = ["/app/inputs/assumptions.csv", "/app/inputs/weekly_plan.csv"]   # files or folders
deliverables = ["/app/deliverables/cash_forecast.xlsx", "/app/deliverables/cfo_memo.pdf"]
```

On top of checks 1-4:

* ``professional.bad_metadata``: ``inputs`` or ``deliverables`` is missing, empty, or not a list of
  absolute paths;
* ``professional.input_not_in_instruction`` / ``professional.deliverable_not_in_instruction``: a
  path the task lists is not named in instruction.md (the solver must be told what is read-only
  and what to hand over);
* ``professional.input_missing``: an input is not in the fresh environment;
* ``professional.inputs_changed``: after the reference run an input file differs, is gone, or a
  file was added to an input folder;
* ``professional.deliverable_missing``: after the reference run a deliverable is absent or empty;
* ``professional.deliverable_wrong_format``: a ``.pdf`` deliverable does not start with
  ``%PDF-``, or an Office Open XML one (``.xlsx``, ``.xlsm``, ``.docx``, ``.pptx``) is not a zip;
* ``professional.values_only_rewarded``: the tests credit pasted values: a copy of the reference's
  deliverables in which every formula of every ``.xlsx``/``.xlsm`` workbook is replaced by its
  value earns at least :data:`VALUES_ONLY_MAX` (0.5). Such a workbook is what a policy gets by
  computing the answers offline and pasting them, with no model at all; the value sections must
  credit only result cells whose formulas reference cells;
* ``professional.disguised_constants_rewarded``: the tests credit constants disguised as formulas:
  the same copy with every numeric workbook result rewritten as ``=<value>+0*<a cell its formula
  referenced>`` (a formula that references a cell, computed off-sheet) earns at least 0.5. The
  tests must count the workbook's values only while it recalculates correctly with moved inputs
  (the seeds' ``LIVE`` sections, gated in test.sh on every ``*recalculates*`` test);
* ``professional.check_failed``: a check trial broke before it could tell (infrastructure, a
  dead container, a workbook the probe could not rewrite); the message says how.

Two trials on the task's image, side by side, each with a check agent. :class:`ReferenceAudit`
hashes the inputs in the fresh container, runs solution/solve.sh as the oracle does, hashes them
again and looks at the deliverables, all inside the reference's own container. :class:`ValuesOnly`
(only for a task with a workbook deliverable) runs solve.sh, then rewrites each workbook in the
container with every formula replaced by its value, recalculated with the ``formulas`` package
that the task image has for its tests (or, in an image without it, the values cached in the file
when openpyxl finds one for every formula); the verifier then scores that, as it scores any agent's
work. An image without Python 3 or openpyxl, or without ``formulas`` and with a workbook that
caches no values (openpyxl writes none), cannot tell: the check is skipped for that task, with no
reason. The probe's verdict is given only when the reference audit finds nothing (it presumes a
reference whose deliverables are there and of their type).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.sandbox import AgentRun, Container
from aes.tasks import Reason, Task, load_task

INPUTS_KEY, DELIVERABLES_KEY = "inputs", "deliverables"
MAGIC = {".pdf": b"%PDF-", ".xlsx": b"PK\x03\x04", ".xlsm": b"PK\x03\x04", ".docx": b"PK\x03\x04",
         ".pptx": b"PK\x03\x04"}
"""The first bytes of a deliverable of each type."""
WORKBOOKS = (".xlsx", ".xlsm")
"""The deliverables that :class:`ValuesOnly` rewrites with values in place of formulas."""
VALUES_ONLY_MAX = 0.5
"""A values-only copy of the reference's deliverables that earns this much or more is rejected."""
CANNOT_TELL = 3
"""The exit status of :data:`VALUES_ONLY_SCRIPT` when the image cannot recalculate or read values."""
_TAIL = 600

VALUES_ONLY_SCRIPT = r'''
import sys
try:
    from openpyxl import load_workbook
except ImportError:
    print("cannot tell: no openpyxl in the image"); sys.exit(3)
try:
    import formulas
except ImportError:
    formulas = None


def recalculated(path):
    import schedula
    values = {}
    for key, ranges in formulas.ExcelModel().loads(path).finish().calculate().items():
        where, _, ref = key.rpartition("!")
        if ":" in ref:
            continue
        value = getattr(ranges, "value", ranges)
        value = value[0, 0] if getattr(value, "shape", None) else value
        value = value.item() if hasattr(value, "item") else value
        if value is schedula.EMPTY:
            value = None
        values[(where.strip("'").split("]", 1)[-1].upper(), ref.replace("$", ""))] = value
    return values


import re
disguise = sys.argv[1:2] == ["--disguise"]
paths = sys.argv[2:] if disguise else sys.argv[1:]
REF = re.compile(r"(?:'[^']+'|[A-Za-z_][A-Za-z0-9_.]*)!\$?[A-Za-z]{1,3}\$?[0-9]+|(?<![A-Za-z0-9_.$])\$?[A-Za-z]{1,3}\$?[0-9]+(?![A-Za-z0-9_(!])")
for path in paths:
    vba = path.lower().endswith(".xlsm")
    book = load_workbook(path, keep_vba=vba)
    cells = [(ws.title, cell) for ws in book.worksheets for row in ws.iter_rows() for cell in row
             if cell.data_type == "f"]
    if formulas is not None:
        values = recalculated(path)
        value_of = lambda sheet, cell: values.get((sheet.upper(), cell.coordinate))
    else:
        cached = load_workbook(path, data_only=True, keep_vba=vba)
        if any(cached[sheet][cell.coordinate].value is None for sheet, cell in cells):
            print(f"cannot tell: no formulas package in the image and {path} caches no values"); sys.exit(3)
        value_of = lambda sheet, cell: cached[sheet][cell.coordinate].value
    disguised = 0
    for sheet, cell in cells:
        value = value_of(sheet, cell)
        if value is not None and not isinstance(value, (bool, int, float, str)):
            value = str(value)  # an Excel error such as #DIV/0!
        ref = REF.search(str(cell.value)) if disguise else None
        if ref and isinstance(value, (int, float)) and not isinstance(value, bool):
            cell.value = f"={value!r}+0*{ref.group()}"  # a constant that pretends to reference a cell
            disguised += 1
            continue
        if disguise:
            continue  # text, flags, errors: left as the live formulas they were
        cell.value = value
        if isinstance(value, str):
            cell.data_type = "s"  # text, even when it starts with "="
    book.save(path)
    if disguise:
        print(f"{path}: {disguised} of {len(cells)} formulas replaced by a constant written as =value+0*cell")
    else:
        print(f"{path}: {len(cells)} formulas replaced by their values")
'''
"""Rewrites each workbook named on its command line with every formula replaced by its value."""

# sha256 of every regular file under each path ("missing PATH" for a path that is not there)
_HASH = ('for p in "$@"; do if [ -d "$p" ]; then find "$p" -type f -exec sha256sum {} +; '
         'elif [ -e "$p" ]; then sha256sum "$p"; else printf "missing  %s\\n" "$p"; fi; done')
# size, the first 8 bytes in hex and the path of each deliverable ("missing" when not a regular file)
_LOOK = ('for p in "$@"; do if [ -f "$p" ]; then printf "%s\\t%s\\t%s\\n" "$(stat -c %s -- "$p")" '
         '"$(head -c 8 -- "$p" | od -An -tx1 | tr -d " \\n")" "$p"; else printf "missing\\t\\t%s\\n" "$p"; fi; done')


def _tail(text: str) -> str:
    text = (text or "").strip()
    return ("..." + text[-_TAIL:]) if len(text) > _TAIL else text


def _digests(container: Container, paths: list[str]) -> dict[str, str] | str:
    """{file: sha256 or "missing"} of every file under ``paths``; a string when it could not be read."""
    out = container.exec(["sh", "-c", _HASH, "sh", *paths], 120, user="0")
    if out.exit_code != 0:
        return f"hashing the inputs failed (exit {out.exit_code}): {_tail(out.output)}"
    digests = {}
    for line in out.output.splitlines():
        digest, sep, path = line.partition("  ")
        if sep:
            digests[path] = digest
    return digests


class ReferenceAudit:
    """A check agent: the reference solution between two digests of the inputs, then a look at
    the deliverables. ``info``: ``before``/``after`` ({file: sha256 or "missing"}),
    ``deliverables`` ({path: [size, first bytes hex]} or None when absent), ``solve_exit``."""

    name = "professional-audit"

    def __init__(self, inputs: list[str], deliverables: list[str]):
        self.inputs, self.deliverables = inputs, deliverables

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        info: dict = {"before": _digests(container, self.inputs)}
        container.upload_dir(task.solution_dir, "/solution", executable=("solve.sh",))
        env = {"DEBIAN_FRONTEND": "noninteractive", **task.spec.solution_env}
        solve = container.exec(["bash", "-c", "/solution/solve.sh"], timeout, env=env, user=task.spec.agent_user)
        info["solve_exit"], info["solve_output"] = solve.exit_code, _tail(solve.output)
        info["after"] = _digests(container, self.inputs)
        look = container.exec(["sh", "-c", _LOOK, "sh", *self.deliverables], 60, user="0")
        found: dict = {}
        for line in look.output.splitlines():
            size, _, rest = line.partition("\t")
            head, _, path = rest.partition("\t")
            if path:
                found[path] = None if size == "missing" else [int(size) if size.isdigit() else 0, head]
        info["deliverables"] = found
        return AgentRun(exit_code=solve.exit_code, output=solve.output, timed_out=solve.timed_out, info=info)


class ValuesOnly:
    """A check agent: the reference solution, then every workbook deliverable rewritten with each
    formula replaced by its value (:data:`VALUES_ONLY_SCRIPT`, as the agent's user), for the
    verifier to score. ``info``: ``solve_exit``, ``solve_output``, ``rewrite_exit`` (None when
    solve.sh failed; :data:`CANNOT_TELL` when the image cannot recalculate), ``rewrite_output``."""

    name = "professional-values-only"

    def __init__(self, workbooks: list[str], disguise: bool = False):
        self.workbooks, self.disguise = workbooks, disguise
        if disguise:
            self.name = "professional-disguised-constants"

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        container.upload_dir(task.solution_dir, "/solution", executable=("solve.sh",))
        env = {"DEBIAN_FRONTEND": "noninteractive", **task.spec.solution_env}
        solve = container.exec(["bash", "-c", "/solution/solve.sh"], max(timeout * 0.75, 1.0), env=env,
                               user=task.spec.agent_user)
        info: dict = {"solve_exit": solve.exit_code, "solve_output": _tail(solve.output), "rewrite_exit": None}
        if solve.exit_code != 0:
            return AgentRun(exit_code=solve.exit_code, output=solve.output, timed_out=solve.timed_out, info=info)
        rewrite = container.exec(["sh", "-c", 'command -v python3 >/dev/null || { echo "cannot tell: no python3"; '
                                  f'exit {CANNOT_TELL}; }}; exec python3 -c "$0" "$@"', VALUES_ONLY_SCRIPT,
                                  *(["--disguise"] if self.disguise else []), *self.workbooks], max(timeout * 0.25, 60.0), user=task.spec.agent_user)
        info["rewrite_exit"], info["rewrite_output"] = rewrite.exit_code, _tail(rewrite.output)
        return AgentRun(exit_code=rewrite.exit_code, output=solve.output + rewrite.output,
                        timed_out=rewrite.timed_out, info=info)


def _values_only(trial, disguised: bool = False) -> list[Reason]:
    """The reason the values-only (or, ``disguised``, the disguised-constants) probe gives (none when
    it cannot tell)."""
    info = trial.agent_info
    if disguised and "solve_exit" in info and info["solve_exit"] == 0 and info.get("rewrite_exit") == 0 \
            and trial.reward is not None and trial.reward >= VALUES_ONLY_MAX:
        return [Reason("professional.disguised_constants_rewarded",
                       f"its tests credit constants written as formulas: the reference's deliverables with every "
                       f"numeric workbook result rewritten as =<its value>+0*<a cell it referenced> earn "
                       f"{trial.reward:.2f} (at least {VALUES_ONLY_MAX}); the workbook's values must count only while "
                       "it recalculates correctly when the inputs they depend on move (LIVE sections, gated on the "
                       f"*recalculates* tests) ({info.get('rewrite_output', '')})")]
    if disguised:
        return [r for r in _values_only(trial) if r.code == "professional.check_failed"]
    if "solve_exit" not in info:
        return [Reason("professional.check_failed", f"the values-only check trial ended before the reference ran "
                                                    f"({trial.outcome.value}: {trial.detail[:300]})")]
    if info["solve_exit"] != 0 or info.get("rewrite_exit") == CANNOT_TELL:
        return []  # the reference audit reports a failing solve.sh; an image without formulas cannot tell
    if info.get("rewrite_exit") != 0:
        return [Reason("professional.check_failed",
                       f"the values-only probe could not rewrite the workbooks (exit {info.get('rewrite_exit')}): "
                       f"{info.get('rewrite_output', '')}")]
    if trial.reward is None:
        return [Reason("professional.check_failed", f"the verifier gave the values-only copy no reward "
                                                    f"({trial.outcome.value}: {trial.detail[:300]})")]
    if trial.reward >= VALUES_ONLY_MAX:
        return [Reason("professional.values_only_rewarded",
                       f"its tests credit pasted values: the reference's deliverables with every workbook formula "
                       f"replaced by its value earn {trial.reward:.2f} (at least {VALUES_ONLY_MAX}); a result cell "
                       f"must count only when its formula references cells ({info.get('rewrite_output', '')})")]
    return []


def _paths(task: Task, key: str) -> list[str] | None:
    value = task.spec.metadata.get(key)
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(p, str) and p.startswith("/") and p.strip() == p and len(p) > 1 for p in value):
        return None
    return [p.rstrip("/") or "/" for p in value]


def static_reasons(task: Task) -> tuple[list[Reason], list[str], list[str]]:
    """What the task lacks to be checked at all (no trial needed), and its inputs and deliverables."""
    reasons = []
    inputs, deliverables = _paths(task, INPUTS_KEY), _paths(task, DELIVERABLES_KEY)
    for key, value, what in ((INPUTS_KEY, inputs, "the read-only input files or folders"),
                             (DELIVERABLES_KEY, deliverables, "the files the solver hands over")):
        if value is None:
            reasons.append(Reason("professional.bad_metadata",
                                  f"task.toml needs [metadata] {key} = [\"/abs/path\", ...]: {what}, as absolute paths"))
    if reasons:
        return reasons, [], []
    for path in inputs:
        if path not in task.instruction:
            reasons.append(Reason("professional.input_not_in_instruction",
                                  f"input {path} is not named in instruction.md: say which inputs are read-only"))
    for path in deliverables:
        if path not in task.instruction and Path(path).name not in task.instruction:
            reasons.append(Reason("professional.deliverable_not_in_instruction",
                                  f"deliverable {path} is not named in instruction.md: say what to hand over, and where"))
    return reasons, inputs, deliverables


def checks(task_dir: Path, runner, image: str) -> list[Reason]:
    """The professional-work checks of the task in ``task_dir`` (built as ``image``)."""
    task = load_task(task_dir)
    reasons, inputs, deliverables = static_reasons(task)
    if reasons:
        return reasons
    workbooks = [p for p in deliverables if p.lower().endswith(WORKBOOKS)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        audit = pool.submit(runner.run, task, ReferenceAudit(inputs, deliverables), image)
        probe = pool.submit(runner.run, task, ValuesOnly(workbooks), image) if workbooks else None
        masked = pool.submit(runner.run, task, ValuesOnly(workbooks, disguise=True), image) if workbooks else None
        trial, values_only = audit.result(), probe.result() if probe else None
        disguised = masked.result() if masked else None
    reasons = _audit(trial, deliverables)
    if reasons or values_only is None:
        return reasons  # the probes presume a sound reference: fix what the audit found first
    return _values_only(values_only) + _values_only(disguised, disguised=True)


def _audit(trial, deliverables: list[str]) -> list[Reason]:
    """The reasons the reference audit gives."""
    reasons: list[Reason] = []
    info = trial.agent_info
    before, after, found = info.get("before"), info.get("after"), info.get("deliverables")
    if not isinstance(before, dict) or not isinstance(after, dict) or not isinstance(found, dict):
        problem = next((x for x in (before, after) if isinstance(x, str)), None)
        return [Reason("professional.check_failed",
                       problem or f"the check trial ended before it could look ({trial.outcome.value}: {trial.detail[:300]})")]

    missing = sorted(p for p, d in before.items() if d == "missing")
    if missing:
        reasons.append(Reason("professional.input_missing",
                              f"the fresh environment lacks the input(s) {', '.join(missing)} that task.toml lists"))
    changed = sorted(p for p in before if before[p] != "missing" and after.get(p) != before[p])
    added = sorted(p for p in after if p not in before and after[p] != "missing")
    if changed or added:
        what = [f"{p} ({'gone' if after.get(p) in (None, 'missing') else 'changed'})" for p in changed]
        what += [f"{p} (added)" for p in added]
        reasons.append(Reason("professional.inputs_changed",
                              f"the reference run changed the read-only inputs: {', '.join(what[:10])}; "
                              "write deliverables elsewhere and never modify the inputs"))
    for path in deliverables:
        seen = found.get(path)
        if not seen or seen[0] <= 0:
            reasons.append(Reason("professional.deliverable_missing",
                                  f"after the reference run (solve.sh exit {info.get('solve_exit')}) the deliverable "
                                  f"{path} is {'empty' if seen else 'absent'}; output: {info.get('solve_output', '')}"))
            continue
        magic = MAGIC.get(Path(path).suffix.lower())
        if magic and not bytes.fromhex(seen[1] or "").startswith(magic):
            reasons.append(Reason("professional.deliverable_wrong_format",
                                  f"{path} does not look like a {Path(path).suffix} file (it starts with bytes "
                                  f"{seen[1] or 'none'}, not {magic.hex()})"))
    return reasons

