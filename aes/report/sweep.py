"""Assemble what a sweep's jobs wrote, by what they ran, and say what was found:

- ``mode=generate`` jobs (their ``generate.json``): Table 2 and Table 8 (:mod:`aes.report.table2`);
- ``mode=run`` jobs (their ``metrics.jsonl``): Table 3 and Fig. 20, arm against arm
  (:mod:`aes.report.training`).

A sweep with neither writes nothing. ``aes report MULTIRUN_DIR`` runs :func:`assemble` by hand;
:class:`SweepReport`, a Hydra callback of the root config, runs it at the end of every ``-m`` run.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

log = logging.getLogger("aes")


@dataclass
class Assembled:
    found: str
    """What the sweep holds, in a sentence (job dirs by mode, the arms of its run jobs)."""
    written: dict[str, Path] = field(default_factory=dict)
    """Name -> path of every file written (empty: nothing to assemble)."""
    texts: list[str] = field(default_factory=list)
    """The markdown tables, to print."""


def assemble(sweep: str | Path) -> Assembled:
    from aes.report import training

    sweep = Path(sweep)
    jobs = training.find_jobs(sweep)
    generate = sorted(sweep.rglob("generate.json"))
    runs = [j for j in jobs if j.mode == "run"]
    modes = Counter(j.mode for j in jobs)
    found = f"{len(jobs)} run dir(s) under {sweep}" + (
        ": " + ", ".join(f"{n} mode={m}" for m, n in sorted(modes.items())) if jobs
        else " (no config.yaml of a run below it)")
    out = Assembled(found)
    if generate:
        from aes.report.table2 import report as table2

        out.written.update(table2(sweep))
        out.texts += [out.written["markdown"].read_text(),
                      "Table 8 (per domain and proposer)\n" + out.written["table8"].read_text()]
        out.found += f"; {len(generate)} generate.json (Tables 2 and 8)"
    if runs:
        comparison = training.compare(runs)
        out.written.update(training.write(sweep, comparison))
        out.texts.append(out.written["training_markdown"].read_text())
        out.found += (f"; {len(comparison.arms)} arm(s) of mode=run jobs ({' | '.join(comparison.labels.values())}), "
                      f"{len(comparison.matched)} matched eval update count(s) (Table 3, Fig. 20)")
    if not out.written:
        out.found += ": nothing to assemble (Tables 2 and 8 need mode=generate jobs, Table 3 and Fig. 20 mode=run jobs)"
    return out


class SweepReport(Callback):
    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        result = assemble(Path(config.hydra.sweep.dir))
        log.info("this sweep: %s", result.found)
        w = result.written
        if "markdown" in w:
            log.info("Table 2 of this sweep: %s (also %s, %s); Table 8: %s", w["markdown"], w["csv"], w["html"],
                     w["table8"])
        if "training_markdown" in w:
            log.info("Table 3 and Fig. 20 of this sweep: %s (also %s, %s)", w["training_markdown"], w["training_csv"],
                     w["training_html"])
