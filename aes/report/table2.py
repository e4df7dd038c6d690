"""Table 2 of a sweep: ``aes report MULTIRUN_DIR`` assembles every ``mode=generate`` job into the
paper's comparison (one row per proposer and harness), as markdown, CSV and an HTML figure.

Each job's ``generate.json`` holds its episodes, each judged on the env it finally submitted.
Rows of jobs with the same proposer, harness, domain and solver (e.g. seeds) are pooled; jobs that
differ in any of them are rows of their own. Columns: episodes,
valid rate (admission checks 1-4: it builds, its reference scores 1, doing nothing < 0.5),
admitted rate (checks 1-6), calibrated rate (in the calibration band), each with its 95% Wilson
interval; tokens and USD of every proposer-side model call (review included) per valid env;
Fig. 5's statistics of the valid envs (data files, solver turns, solver success). In table2.csv
every interval is five numeric columns (``valid_rate, valid_low, valid_high, valid_k, valid_n``),
every other cell a plain number; table2.md writes them as text.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

from aes.report.stats import rate

ARM = ("proposer", "harness", "domain", "solver")
"""What makes a row: jobs that agree on all four are pooled."""
COLUMNS = (*ARM, "episodes", "valid", "admitted", "calibrated", "tokens / valid env",
           "USD / valid env", "data files", "solver turns", "solver success", "jobs")
INTERVALS = ("valid", "admitted", "calibrated")
INTERVAL_FIELDS = ("rate", "low", "high", "k", "n")


def ci_text(ci: dict) -> str:
    if not ci or ci.get("rate") is None:
        return "-"
    return f"{ci['rate']:.1%} [{ci['low']:.1%}, {ci['high']:.1%}] ({ci['k']}/{ci['n']})"


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def collect(sweep: Path) -> list[dict]:
    """One row per (proposer, harness, domain, solver) over the ``generate.json`` files below ``sweep``
    ("?" where a file does not say)."""
    arms: dict[tuple[str, ...], dict] = defaultdict(lambda: {"episodes": [], "jobs": 0})
    for path in sorted(sweep.rglob("generate.json")):
        data = json.loads(path.read_text())
        key = tuple(str(data.get(k) or "?") for k in ARM)
        arms[key]["episodes"] += data.get("episodes", [])
        arms[key]["jobs"] += 1
    rows = []
    for key, arm in sorted(arms.items()):
        eps = arm["episodes"]
        valid = [e for e in eps if e.get("checks_1_4")]
        tokens = sum(e.get("tokens", 0) for e in eps)
        cost = sum(e.get("cost_usd", 0.0) for e in eps)
        rows.append({
            **dict(zip(ARM, key)), "episodes": len(eps), "jobs": arm["jobs"],
            "valid": rate(len(valid), len(eps)),
            "admitted": rate(sum(bool(e.get("checks_1_6")) for e in eps), len(eps)),
            "calibrated": rate(sum(bool(e.get("calibrated")) for e in eps), len(eps)),
            "tokens / valid env": tokens / len(valid) if valid else None,
            "USD / valid env": cost / len(valid) if valid else None,
            "data files": _mean([e.get("stats", {}).get("data_files") for e in valid]),
            "solver turns": _mean([e.get("stats", {}).get("solver_turns") for e in valid]),
            "solver success": _mean([e.get("stats", {}).get("solver_success") for e in valid]),
        })
    return rows


def _cell(row: dict, column: str) -> str:
    value = row[column]
    if isinstance(value, dict):
        return ci_text(value)
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def csv_header() -> list[str]:
    """table2.csv's columns: snake_case names, each interval as its five numbers."""
    out = []
    for column in COLUMNS:
        name = column.replace(" / ", "_per_").replace(" ", "_").lower()
        out += [f"{name}_{f}" for f in INTERVAL_FIELDS] if column in INTERVALS else [name]
    return out


def csv_row(row: dict) -> list:
    """One row of table2.csv: numbers as numbers, a missing value as an empty cell."""
    out: list = []
    for column in COLUMNS:
        value = row[column]
        values = [value.get(f) for f in INTERVAL_FIELDS] if column in INTERVALS else [value]
        out += ["" if v is None else v for v in values]
    return out


def write(sweep: Path, rows: list[dict]) -> dict[str, Path]:
    """table2.md, table2.csv and table2.html in ``sweep``; their paths."""
    out = {"markdown": sweep / "table2.md", "csv": sweep / "table2.csv", "html": sweep / "table2.html"}
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r, c) for c in COLUMNS) + " |" for r in rows]
    note = ("\nvalid = admission checks 1-4 on the env each episode finally submitted; admitted = checks 1-6; "
            "calibrated = in the calibration band. Intervals: 95% Wilson. Costs count every proposer-side "
            "model call, the review's included.\n")
    out["markdown"].write_text("\n".join(lines) + "\n" + note)
    with open(out["csv"], "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(csv_header())
        writer.writerows(csv_row(r) for r in rows)
    out["html"].write_text(_html(rows, "\n".join(lines), note))
    return out


def _html(rows: list[dict], table: str, note: str) -> str:
    import html as html_lib

    from aes.report.html import _figure

    def draw(ax):
        varied = [k for k in ("domain", "solver") if len({x[k] for x in rows}) > 1]  # named only where they differ
        labels = ["\n".join([r["proposer"], r["harness"], *(r[k] for k in varied)]) for r in rows]
        for offset, key in ((-0.25, "valid"), (0.0, "admitted"), (0.25, "calibrated")):
            values = [r[key]["rate"] or 0.0 for r in rows]
            low = [max(0.0, v - (r[key]["low"] or 0.0)) for v, r in zip(values, rows)]
            high = [max(0.0, (r[key]["high"] or 0.0) - v) for v, r in zip(values, rows)]
            ax.bar([i + offset for i in range(len(rows))], values, width=0.25, yerr=[low, high], capsize=3, label=key)
        ax.set_xticks(range(len(rows)), labels, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("rate (95% interval)")
        ax.legend()

    figure = (f"<img src='data:image/png;base64,{_figure(draw)}' alt='Table 2 rates'>" if rows
              else "<p>No generate.json under this directory: no mode=generate job ran.</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Table 2</title></head><body>"
            f"<h1>Table 2</h1>{figure}<pre>{html_lib.escape(table)}</pre><p>{html_lib.escape(note)}</p></body></html>")


def table8(sweep: Path) -> str:
    """Paper Table 8 (App. C): acceptance rate and mean generation rounds of accepted tasks, per domain
    and proposer (accepted = passed admission checks 1-6 on the env it finally submitted; its rounds
    are its revisions + 1, the first draft being round 1, as the paper counts "accepted in two rounds")."""
    arms: dict[tuple[str, str], list] = defaultdict(list)
    for path in sorted(sweep.rglob("generate.json")):
        data = json.loads(path.read_text())
        arms[(data.get("domain") or "terminal", data.get("proposer") or "?")] += data.get("episodes", [])
    lines = ["| domain | proposer | episodes | accepted | mean rounds of accepted |", "|---|---|---|---|---|"]
    for (domain, proposer), eps in sorted(arms.items()):
        accepted = [e for e in eps if e.get("checks_1_6")]
        rounds = _mean([float(e.get("revisions", 0)) + 1 for e in accepted])
        lines.append(f"| {domain} | {proposer} | {len(eps)} | {ci_text(rate(len(accepted), len(eps)))} | "
                     f"{'n/a' if rounds is None else f'{rounds:.2f}'} |")
    if not arms:
        lines.append("| - | - | 0 | no generate.json under this directory: no mode=generate job ran | - |")
    return "\n".join(lines) + "\n"


def report(sweep: str | Path) -> dict[str, Path]:
    sweep = Path(sweep)
    out = write(sweep, collect(sweep))
    out["table8"] = sweep / "table8.md"
    out["table8"].write_text(table8(sweep))
    return out
