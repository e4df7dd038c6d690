"""Table 3 and Fig. 20 of a sweep of ``mode=run`` jobs: the training comparison, arm against arm.

An *arm* is what the command lines of the jobs set differently (``experiment=static_pool``,
``flywheel.train_proposer=false``, read from each job's ``.hydra/overrides.yaml``); jobs that differ
only in ``seed`` are replicas of one arm, and the spread is over them. From each job's
``metrics.jsonl``:

- Table 3: the benchmark scores (``eval`` rows: avg@k and pass@k) at *matched* update counts —
  the updates every arm evaluated — as the mean over the arm's jobs with its spread (sample std,
  min and max; n jobs);
- Fig. 20: the valid-env rate of every generation (``round`` rows), the same way; a generation
  without proposer episodes (a static pool) has no rate, not 0%.

``write`` puts ``training.md``, ``training.csv`` (long format, numeric columns: one row per arm,
metric and update or generation) and ``training.html`` (both curves in one figure) in the sweep dir.
"""

from __future__ import annotations

import csv
import html as html_lib
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aes.report.metrics import read_metrics

REPLICA_KEYS = ("seed",)
"""Overrides that make replicas of one arm, not arms: the spread is taken over them."""
NOT_ARM = ("hydra.", "run_dir")
EVAL_KEY = re.compile(r"^eval/(avg|pass)@(\d+)$")
CSV_COLUMNS = ("arm", "metric", "x", "x_value", "jobs", "mean", "std", "min", "max", "episodes")


@dataclass
class Job:
    """One run dir of the sweep."""

    path: Path
    mode: str
    overrides: dict[str, str] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)

    @property
    def evals(self) -> list[dict]:
        return [r for r in self.rows if r.get("event") == "eval"]

    @property
    def rounds(self) -> list[dict]:
        return [r for r in self.rows if r.get("event") == "round"]


def find_jobs(sweep: Path) -> list[Job]:
    """Every run dir at or below ``sweep`` (a dir holding the ``config.yaml`` a run writes), in order;
    the walk does not go into a run dir's own folders."""
    jobs = []
    for root, dirs, files in os.walk(sweep):
        here = Path(root)
        if "config.yaml" in files and here.name != ".hydra":
            try:
                config = yaml.safe_load((here / "config.yaml").read_text()) or {}
            except yaml.YAMLError:
                config = {}
            if isinstance(config, dict) and config.get("mode"):
                jobs.append(Job(here, str(config["mode"]), _overrides(here), read_metrics(here / "metrics.jsonl")))
                dirs.clear()
                continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(jobs, key=lambda j: _order(j.path, sweep))


def _order(path: Path, sweep: Path) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in path.relative_to(sweep).parts)


def _overrides(run_dir: Path) -> dict[str, str]:
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    out = {}
    for item in yaml.safe_load(path.read_text()) or []:
        key, _, value = str(item).partition("=")
        out[key.lstrip("+~")] = "(deleted)" if key.startswith("~") else value
    return out


def arm_keys(jobs: list[Job]) -> list[str]:
    """The override keys whose values differ between jobs (seeds and Hydra's own excluded)."""
    keys = sorted({k for j in jobs for k in j.overrides})
    return [k for k in keys if k not in REPLICA_KEYS and not k.startswith(NOT_ARM)
            and len({j.overrides.get(k) for j in jobs}) > 1]


def arms(jobs: list[Job]) -> dict[str, list[Job]]:
    """Jobs by arm label (``key=value,...`` of :func:`arm_keys`; "all jobs" when nothing differs)."""
    keys = arm_keys(jobs)
    out: dict[str, list[Job]] = {}
    for job in jobs:
        label = ",".join(f"{k}={job.overrides.get(k, '(default)')}" for k in keys) or "all jobs"
        out.setdefault(label, []).append(job)
    return out


def spread(values: list[float]) -> dict:
    """``{"jobs", "mean", "std", "min", "max"}`` over jobs (std: sample std, None for one job)."""
    if not values:
        return {"jobs": 0, "mean": None, "std": None, "min": None, "max": None}
    return {"jobs": len(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else None, "min": min(values), "max": max(values)}


def eval_points(jobs: list[Job]) -> dict[tuple[str, int], dict[int, list[float]]]:
    """``{(metric, k): {update: [value per job]}}`` from the jobs' eval rows (the last row per update)."""
    out: dict[tuple[str, int], dict[int, list[float]]] = {}
    for job in jobs:
        mine: dict[tuple[str, int, int], float] = {}
        for row in job.evals:
            for key, value in row.items():
                m = EVAL_KEY.match(key)
                if m and isinstance(value, (int, float)) and isinstance(row.get("update"), int):
                    mine[(f"{m.group(1)}@{m.group(2)}", int(m.group(2)), row["update"])] = float(value)
        for (metric, k, update), value in mine.items():
            out.setdefault((metric, k), {}).setdefault(update, []).append(value)
    return out


def generation_points(jobs: list[Job]) -> dict[int, dict]:
    """``{generation: {"values": [valid-env rate per job], "episodes": n, "idle": [why none ran]}}``."""
    out: dict[int, dict] = {}
    for job in jobs:
        for row in job.rounds:
            if not isinstance(row.get("round"), int):
                continue
            point = out.setdefault(row["round"], {"values": [], "episodes": 0, "idle": []})
            point["episodes"] += int(row.get("episodes") or 0)
            if isinstance(row.get("valid_env_rate"), (int, float)):
                point["values"].append(float(row["valid_env_rate"]))
            elif not row.get("episodes"):
                point["idle"].append(str(row.get("no_episodes") or "no proposer episodes"))
    return out


@dataclass
class Comparison:
    """What :func:`compare` found: arms, matched eval rows, generation rows and sentences."""

    arms: dict[str, list[Job]]
    eval_rows: list[dict]
    """One per arm, metric and matched update: ``{"arm", "metric", "update", **spread}``."""
    generation_rows: list[dict]
    """One per arm and generation: ``{"arm", "generation", "episodes", "idle", **spread}``."""
    matched: list[int]
    """Update counts evaluated by every arm."""
    unmatched: dict[str, list[int]]
    """Per arm, the update counts it evaluated that some other arm did not."""
    curves: dict[str, dict] = field(default_factory=dict)
    """Per arm: ``{"eval": {metric: {update: spread}}, "valid": {generation: spread}}`` (every point: the figure)."""


def compare(jobs: list[Job]) -> Comparison:
    by_arm = arms(jobs)
    points = {arm: eval_points(js) for arm, js in by_arm.items()}
    updates = {arm: {u for series in p.values() for u in series} for arm, p in points.items()}
    matched = sorted(set.intersection(*updates.values())) if updates and all(updates.values()) else []
    eval_rows, generation_rows, curves = [], [], {}
    for arm, js in by_arm.items():
        series = points[arm]
        curves[arm] = {"eval": {metric: {u: spread(v) for u, v in sorted(s.items())}
                                for (metric, _), s in sorted(series.items())}, "valid": {}}
        for (metric, _k), s in sorted(series.items()):
            for update in matched:
                if update in s:
                    eval_rows.append({"arm": arm, "metric": metric, "update": update, **spread(s[update])})
        for generation, point in sorted(generation_points(js).items()):
            row = {"arm": arm, "generation": generation, "episodes": point["episodes"],
                   "idle": sorted(set(point["idle"])), **spread(point["values"])}
            generation_rows.append(row)
            curves[arm]["valid"][generation] = row
    unmatched = {arm: sorted(u - set(matched)) for arm, u in updates.items() if u - set(matched)}
    return Comparison(by_arm, eval_rows, generation_rows, matched, unmatched, curves)


# -- output ------------------------------------------------------------------------------------------
def _num(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1%}" if percent else f"{value:.3f}"


def _cell(row: dict, percent: bool = False) -> str:
    if not row["jobs"]:
        return "n/a"
    text = _num(row["mean"], percent)
    if row["std"] is not None:
        text += f" ± {_num(row['std'], percent)} [{_num(row['min'], percent)}, {_num(row['max'], percent)}]"
    return f"{text} (n={row['jobs']})"


def _wide(c: Comparison, rows: list[dict], x: str, cell) -> list[str]:
    """A markdown table with one row per ``x`` value and one column per arm."""
    names = list(c.arms)
    by = {(r[x], r["arm"]): r for r in rows}
    lines = ["| " + " | ".join([x, *(f"`{a}`" for a in names)]) + " |", "|" + "---|" * (len(names) + 1)]
    for value in sorted({r[x] for r in rows}):
        lines.append("| " + " | ".join([str(value), *(cell(by[(value, a)]) if (value, a) in by else "-"
                                                      for a in names)]) + " |")
    return lines


def markdown(c: Comparison) -> str:
    lines = ["# Training comparison (Table 3, Fig. 20)", ""]
    for arm, js in c.arms.items():
        seeds = sorted({j.overrides.get("seed", "(default)") for j in js})
        lines.append(f"- arm `{arm}`: {len(js)} job(s) ({', '.join(j.path.name for j in js)}; seed {', '.join(seeds)})")
    lines += ["", "Cells: mean ± sample std [min, max] over the arm's jobs (n = jobs).", "",
              "## Benchmark at matched update counts (Table 3)", ""]
    if c.eval_rows:
        for metric in sorted({r["metric"] for r in c.eval_rows}):
            rows = [r for r in c.eval_rows if r["metric"] == metric]
            lines += [f"{metric}:", "", *_wide(c, rows, "update", _cell), ""]
    elif any(curve["eval"] for curve in c.curves.values()):
        lines.append("No update count was evaluated by every arm: the arms cannot be compared at matched updates.")
    else:
        lines.append("No eval rows in any job: run the sweep with eval.tasks=BENCHMARK_DIR (and eval.every=N).")
    for arm, updates in c.unmatched.items():
        lines.append(f"\n`{arm}` also evaluated at update(s) {', '.join(map(str, updates))}, which not every arm "
                     "reached.")
    lines += ["", "## Valid-env rate per generation (Fig. 20)", ""]
    if c.generation_rows:
        def valid(r: dict) -> str:
            if not r["jobs"]:
                return f"no episodes ({'; '.join(r['idle']) or 'none ran'})"
            return f"{_cell(r, percent=True)}, {r['episodes']} episodes"

        lines += _wide(c, c.generation_rows, "generation", valid)
    else:
        lines.append("No round rows in any job: no generation finished.")
    return "\n".join(lines) + "\n"


def csv_rows(c: Comparison) -> list[list]:
    out = []
    for r in c.eval_rows:
        out.append([r["arm"], r["metric"], "update", r["update"], r["jobs"], r["mean"], r["std"], r["min"], r["max"],
                    ""])
    for r in c.generation_rows:
        out.append([r["arm"], "valid_env_rate", "generation", r["generation"], r["jobs"], r["mean"], r["std"], r["min"],
                    r["max"], r["episodes"]])
    return [["" if v is None else v for v in row] for row in out]


def figure(c: Comparison) -> str:
    """Both curves in one PNG (base64): the benchmark per update and the valid-env rate per generation,
    one line per arm (its mean) with a band from the min to the max of its jobs."""
    import matplotlib

    matplotlib.use("Agg")
    import base64
    import io

    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), dpi=100)
    try:
        drawn = {"left": False, "right": False}
        for i, (arm, curve) in enumerate(c.curves.items()):
            color = f"C{i % 10}"
            for metric, points in curve["eval"].items():
                xs = list(points)
                left.plot(xs, [p["mean"] for p in points.values()], color=color, marker="o" if len(xs) <= 60 else None,
                          linestyle="-" if metric.startswith("avg") else "--", label=f"{arm}: {metric}")
                left.fill_between(xs, [p["min"] for p in points.values()], [p["max"] for p in points.values()],
                                  color=color, alpha=0.15, linewidth=0)
                drawn["left"] = True
            valid = {g: p for g, p in curve["valid"].items() if p["jobs"]}
            if valid:
                xs = list(valid)
                right.plot(xs, [p["mean"] for p in valid.values()], color=color, marker="o", label=arm)
                right.fill_between(xs, [p["min"] for p in valid.values()], [p["max"] for p in valid.values()],
                                   color=color, alpha=0.15, linewidth=0)
                drawn["right"] = True
        for ax, xlabel, ylabel, key, empty in (
                (left, "DPPO updates", "benchmark score", "left", "no eval rows (eval.tasks unset)"),
                (right, "generation", "valid-env rate", "right", "no proposer episodes in any generation")):
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_ylim(-0.04, 1.08)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
            ax.grid(axis="y", alpha=0.3)
            ax.spines[["top", "right"]].set_visible(False)
            if drawn[key]:
                ax.legend(fontsize=7, frameon=False)
            else:
                ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="gray")
        for x in c.matched:
            left.axvline(x, color="gray", alpha=0.12, linewidth=0.8)
        right.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        left.set_title("Benchmark during training (Table 3)", fontsize=10)
        right.set_title("Valid-env rate per generation (Fig. 20)", fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def write(sweep: Path, c: Comparison) -> dict[str, Path]:
    """training.md, training.csv and training.html in ``sweep``; their paths."""
    out = {"training_markdown": sweep / "training.md", "training_csv": sweep / "training.csv",
           "training_html": sweep / "training.html"}
    text = markdown(c)
    out["training_markdown"].write_text(text)
    with open(out["training_csv"], "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(csv_rows(c))
    out["training_html"].write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Training comparison</title></head><body>"
        f"<h1>Training comparison</h1><img src='data:image/png;base64,{figure(c)}' alt='Table 3 and Fig. 20'>"
        f"<pre>{html_lib.escape(text)}</pre></body></html>")
    return out
