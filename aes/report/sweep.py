"""At the end of a multirun (``-m``), assemble what its jobs wrote: Table 2 for ``mode=generate``
sweeps (``aes report MULTIRUN_DIR`` does the same by hand), and say where it went."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

log = logging.getLogger("aes")


class SweepReport(Callback):
    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        if not any(sweep.rglob("generate.json")):
            return
        from aes.report.table2 import report

        out = report(sweep)
        log.info("Table 2 of this sweep: %s (also %s, %s); Table 8: %s", out["markdown"], out["csv"], out["html"],
                 out["table8"])
