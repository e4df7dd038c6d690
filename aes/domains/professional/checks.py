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
* ``professional.check_failed``: the check trial broke before it could tell (infrastructure, a
  dead container); the message says how.

One trial on the task's image with a check agent (:class:`ReferenceAudit`): it hashes the inputs
in the fresh container, runs solution/solve.sh as the oracle does, hashes them again and looks at
the deliverables, all inside the reference's own container.
"""

from __future__ import annotations

from pathlib import Path

from aes.sandbox import AgentRun, Container
from aes.tasks import Reason, Task, load_task

INPUTS_KEY, DELIVERABLES_KEY = "inputs", "deliverables"
MAGIC = {".pdf": b"%PDF-", ".xlsx": b"PK\x03\x04", ".xlsm": b"PK\x03\x04", ".docx": b"PK\x03\x04",
         ".pptx": b"PK\x03\x04"}
"""The first bytes of a deliverable of each type."""
_TAIL = 600

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
    trial = runner.run(task, ReferenceAudit(inputs, deliverables), image)
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

