"""Table 2 of a sweep: ``aes report MULTIRUN_DIR`` assembles every ``mode=generate`` job into the
paper's comparison, as markdown, CSV and an HTML page.

The paper's layout (:func:`paper_tables`): one table per domain and solver, a row per proposer,
and per harness (Prompt, Prompt + Env Feedback, AutoEnvScaling = terminal) the valid-env rate
with its interval, then the cost per valid env with its ratio to the Prompt arm of the same
proposer (``1.6× ↑``). Local models cost nothing: then the tokens per valid env stand in for the
cost. Below it, every column of every arm (the CSV's rows).

Each job's ``generate.json`` holds its episodes, each judged on the env it finally submitted.
Rows of jobs with the same proposer, harness, domain and solver (e.g. seeds) are pooled; jobs that
differ in any of them are rows of their own. Columns: episodes,
valid rate (admission checks 1-4: it builds, its reference scores 1, doing nothing < 0.5),
accepted rate (checks 1-6), calibrated rate (in the calibration band), each with its 95% Wilson
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
from dataclasses import dataclass
from pathlib import Path

from aes.report.page import markdown_table, text_table
from aes.report.stats import rate

ARM = ("proposer", "harness", "domain", "solver")
"""What makes a row: jobs that agree on all four are pooled."""
COLUMNS = (*ARM, "episodes", "valid", "accepted", "calibrated", "tokens / valid env",
           "USD / valid env", "data files", "solver turns", "solver success", "jobs")
INTERVALS = ("valid", "accepted", "calibrated")
INTERVAL_FIELDS = ("rate", "low", "high", "k", "n")
HARNESSES = {"prompt": "Prompt", "prompt_feedback": "Prompt + Env Feedback", "terminal": "AutoEnvScaling (terminal)"}
"""The paper's three arms, in its order, by the names it gives them."""
BASELINE = "prompt"
"""The arm every other harness's cost per valid env is compared with."""


def is_valid(episode: dict) -> bool:
    """Table 2's "valid" of one episode as ``generate.json`` records it (admission checks 1-4 on the env
    it finally submitted); how it is computed is the proposer's business, not the layout's."""
    value = episode.get("checks_1_4", episode.get("valid"))
    return bool(value)


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
        valid = [e for e in eps if is_valid(e)]
        tokens = sum(e.get("tokens", 0) for e in eps)
        cost = sum(e.get("cost_usd", 0.0) for e in eps)
        rows.append({
            **dict(zip(ARM, key)), "episodes": len(eps), "jobs": arm["jobs"],
            "valid": rate(len(valid), len(eps)),
            "accepted": rate(sum(bool(e.get("checks_1_6")) for e in eps), len(eps)),
            "calibrated": rate(sum(bool(e.get("calibrated")) for e in eps), len(eps)),
            "tokens": tokens, "cost": cost,
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


NOTE = ("valid = admission checks 1-4 on the env each episode finally submitted (it builds, its reference "
        "scores 1, doing nothing scores < 0.5); accepted = checks 1-6; calibrated = in the calibration band. "
        "Intervals: 95% Wilson. Costs count every proposer-side model call, the review's included; the ratio "
        "compares a harness's cost per valid env with the Prompt arm's of the same proposer.")


@dataclass
class PaperTable:
    """One table in the paper's layout: a row per proposer, harnesses as columns."""

    title: str
    headers: list[str]
    rows: list[list[str]]


def _harness_order(names: set[str]) -> list[str]:
    return [h for h in HARNESSES if h in names] + sorted(names - set(HARNESSES))


def _ratio(value: float | None, baseline: float | None) -> str:
    if value is None or not baseline:
        return ""
    ratio = value / baseline
    arrow = "↑" if ratio > 1.0005 else "↓" if ratio < 0.9995 else "="
    return f" ({ratio:.2g}× {arrow})"


def paper_tables(rows: list[dict]) -> list[PaperTable]:
    """Table 2 as the paper lays it out, one per (domain, solver) the sweep ran."""
    out = []
    contexts = sorted({(r["domain"], r["solver"]) for r in rows})
    for domain, solver in contexts:
        mine = [r for r in rows if (r["domain"], r["solver"]) == (domain, solver)]
        by = {(r["proposer"], r["harness"]): r for r in mine}
        harnesses = _harness_order({r["harness"] for r in mine})
        money = any((r["USD / valid env"] or 0) > 0 for r in mine)
        per = "USD / valid env" if money else "tokens / valid env"
        unit = "cost per valid env (USD)" if money else "tokens per valid env (the models cost nothing)"
        names = [HARNESSES.get(h, h) for h in harnesses]
        headers = ["proposer", *(f"valid: {n}" for n in names), *(f"{'cost' if money else 'tokens'}: {n}" for n in names)]
        table_rows = []
        for proposer in sorted({r["proposer"] for r in mine}):
            base = by.get((proposer, BASELINE))
            valid = [ci_text(by[(proposer, h)]["valid"]) if (proposer, h) in by else "-" for h in harnesses]
            costs = []
            for h in harnesses:
                row = by.get((proposer, h))
                if row is None:
                    costs.append("-")
                elif row[per] is None:
                    costs.append("n/a (no valid env)")
                else:
                    text = (f"{row[per]:.2f}" if row[per] >= 0.1 else f"{row[per]:.2g}") if money else f"{row[per]:,.0f}"
                    costs.append(text + ("" if h == BASELINE or base is None else _ratio(row[per], base[per])))
            table_rows.append([proposer, *valid, *costs])
        out.append(PaperTable(f"Table 2: valid-env rate and {unit}; domain {domain}, solver {solver}", headers,
                              table_rows))
    return out


def write(sweep: Path, rows: list[dict]) -> dict[str, Path]:
    """table2.md, table2.csv and table2.html in ``sweep``; their paths."""
    out = {"markdown": sweep / "table2.md", "csv": sweep / "table2.csv", "html": sweep / "table2.html"}
    tables = paper_tables(rows)
    long_rows = [[_cell(r, c) for c in COLUMNS] for r in rows]
    text = "".join(f"## {t.title}\n\n" + markdown_table(t.headers, t.rows) + "\n" for t in tables)
    text += "## Every column, one row per arm\n\n" + markdown_table(list(COLUMNS), long_rows) + f"\n{NOTE}\n"
    out["markdown"].write_text(text)
    with open(out["csv"], "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(csv_header())
        writer.writerows(csv_row(r) for r in rows)
    out["html"].write_text(_html(rows, tables, long_rows))
    return out


def _html(rows: list[dict], tables: list[PaperTable], long_rows: list[list[str]]) -> str:
    from aes.report.page import document, esc
    from aes.report.plots import figure

    def draw(ax):
        varied = [k for k in ("domain", "solver") if len({x[k] for x in rows}) > 1]  # named only where they differ
        labels = ["\n".join([r["proposer"], r["harness"], *(r[k] for k in varied)]) for r in rows]
        for offset, key in ((-0.25, "valid"), (0.0, "accepted"), (0.25, "calibrated")):
            values = [r[key]["rate"] or 0.0 for r in rows]
            low = [max(0.0, v - (r[key]["low"] or 0.0)) for v, r in zip(values, rows)]
            high = [max(0.0, (r[key]["high"] or 0.0) - v) for v, r in zip(values, rows)]
            ax.bar([i + offset for i in range(len(rows))], values, width=0.25, yerr=[low, high], capsize=3, label=key)
        ax.set_xticks(range(len(rows)), labels, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("rate (95% interval)")
        ax.legend()

    if not rows:
        return document("Table 2", "<p class=\"empty\">No generate.json under this directory: no mode=generate job "
                                   "ran.</p>")
    body = "".join(f"<h2>{esc(t.title)}</h2>" + text_table(f"table2-{i}", t.headers, t.rows)
                   for i, t in enumerate(tables))
    body += (f"<h2>Rates per arm</h2><figure><img alt=\"Table 2 rates\" src=\"data:image/png;base64,"
             f"{figure(draw, (max(5.6, 1.3 * len(rows)), 3.4))}\"></figure>"
             f"<h2>Every column, one row per arm</h2>{text_table('table2-arms', list(COLUMNS), long_rows, len(ARM))}"
             f"<p class=\"small muted\">{esc(NOTE)}</p>")
    return document("Table 2", body, subtitle="the sweep's mode=generate jobs (aes report)")


def table8(sweep: Path) -> str:
    """Paper Table 8 (App. C): acceptance rate and mean generation rounds of accepted tasks, per domain
    and proposer (accepted = App. C.1's admission: checks 1-4 as the domain runs them — it builds, the
    reference earns 1, doing nothing earns 0 where the domain demands it, a fresh start is alike — on the
    env it finally submitted, neither review nor calibration; its rounds
    are its revisions + 1, the first draft being round 1, as the paper counts "accepted in two rounds")."""
    arms: dict[tuple[str, str], list] = defaultdict(list)
    for path in sorted(sweep.rglob("generate.json")):
        data = json.loads(path.read_text())
        arms[(data.get("domain") or "terminal", data.get("proposer") or "?")] += data.get("episodes", [])
    lines = ["| domain | proposer | episodes | accepted | mean rounds of accepted |", "|---|---|---|---|---|"]
    for (domain, proposer), eps in sorted(arms.items()):
        accepted = [e for e in eps if e.get("checks_1_4", e.get("valid"))]
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
