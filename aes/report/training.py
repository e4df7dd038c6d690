"""Table 3 and Fig. 20 of a sweep of ``mode=run`` jobs: the training comparison, arm against arm.

An *arm* is what the command lines of the jobs set differently (``experiment=static_pool``,
``flywheel.train_proposer=false``, read from each job's ``.hydra/overrides.yaml``); jobs that differ
only in ``seed`` are replicas of one arm, and the spread is over them. From each job's
``metrics.jsonl``:

- Table 3: the benchmark scores (``eval`` rows: avg@k and pass@k) at *matched* update counts —
  the updates every arm evaluated — as the mean over the arm's jobs with its spread (sample std,
  min and max; n jobs);
- Fig. 20: the valid-env rate of every generation (``round`` rows) at the solver step it ran at,
  the same way; a generation without proposer episodes (a static pool) has no rate, not 0%.

Table 3 is laid out as the paper's: a row for each solver before training (update 0), then one
per setting (the arm, named in words: "static pool (Tmax-style)", "w/o solver feedback", ...) at
the last update count every arm reached, and a column per proposer. ``write`` puts
``training.md``, ``training.csv`` (long format, numeric columns: one row per arm, metric and update
or step) and ``training.html`` (both curves in one figure, the tables as tables) in the sweep dir.
"""

from __future__ import annotations

import csv
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aes.report.metrics import read_metrics
from aes.report.page import document, esc, markdown_table, text_table

REPLICA_KEYS = ("seed",)
"""Overrides that make replicas of one arm, not arms: the spread is taken over them."""
NOT_ARM = ("hydra.", "run_dir")
EVAL_KEY = re.compile(r"^eval/(avg|pass)@(\d+)$")
CSV_COLUMNS = ("arm", "arm_label", "metric", "x", "x_value", "jobs", "mean", "std", "min", "max", "episodes")
AXES = ("proposer", "solver")
"""Overrides that are Table 3's columns and row groups, not its settings."""
SETTINGS = {
    ("experiment", "static_pool"): "static pool (Tmax-style)",
    ("experiment", "paper_frontier"): "AutoEnvScaling",
    ("experiment", "paper_self_play"): "AutoEnvScaling, self-play",
    ("experiment", "self_play"): "self-play",
    ("experiment", "simulated"): "simulated flywheel",
    ("harness.solver_feedback", "false"): "w/o solver feedback",
    ("harness.solver_feedback", "true"): "with solver feedback",
    ("flywheel.train_proposer", "false"): "w/o proposer training",
    ("flywheel.train_proposer", "true"): "with proposer training",
    ("flywheel.assignments_per_round", "0"): "static pool (no proposer)",
    ("flywheel.refresh", "false"): "no pool review",
    ("flywheel.refresh", "true"): "with pool review",
}
"""Settings in the paper's words, by the override that makes them."""
DEFAULTS = {"experiment": "AutoEnvScaling", "flywheel.assignments_per_round": "AutoEnvScaling",
            "harness.solver_feedback": "with solver feedback", "flywheel.train_proposer": "with proposer training",
            "flywheel.refresh": "with pool review"}
"""What a setting is called where the job left the key at its default."""


def setting_name(key: str, value: str) -> str:
    """One override as a reader would name the setting it makes."""
    if (key, value) in SETTINGS:
        return SETTINGS[(key, value)]
    if value == "(default)":
        return DEFAULTS.get(key, f"{key.rsplit('.', 1)[-1].replace('_', ' ')} as configured")
    return f"{key.rsplit('.', 1)[-1].replace('_', ' ')} {value}"


@dataclass
class Job:
    """One run dir of the sweep."""

    path: Path
    mode: str
    overrides: dict[str, str] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def name_of(self, section: str) -> str:
        """``proposer.name`` / ``solver.name`` of the job's config ("?" when it does not say)."""
        value = self.config.get(section)
        return str(value.get("name") or "?") if isinstance(value, dict) else "?"

    @property
    def interval(self) -> int | None:
        fly = self.config.get("flywheel")
        value = fly.get("proposer_interval") if isinstance(fly, dict) else None
        return value if isinstance(value, int) else None

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
                jobs.append(Job(here, str(config["mode"]), _overrides(here), read_metrics(here / "metrics.jsonl"),
                                config))
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
    """Jobs by arm (``key=value,...`` of :func:`arm_keys`; "all jobs" when nothing differs)."""
    keys = arm_keys(jobs)
    out: dict[str, list[Job]] = {}
    for job in jobs:
        label = ",".join(f"{k}={job.overrides.get(k, '(default)')}" for k in keys) or "all jobs"
        out.setdefault(label, []).append(job)
    return out


def arm_label(arm: str) -> str:
    """An arm in words: its settings (proposer and solver left out: they are Table 3's axes)."""
    if arm == "all jobs":
        return arm
    parts = [kv.partition("=") for kv in arm.split(",")]
    names = [setting_name(k, v) for k, _, v in parts if k not in AXES]
    axes = [v for k, _, v in parts if k in AXES]
    named = list(dict.fromkeys(names)) or ["as configured"]
    return "; ".join(named) + (f" ({', '.join(axes)})" if axes else "")


def setting_of(arm: str) -> str:
    """The arm's settings alone (its proposer and solver are Table 3's columns and row groups)."""
    parts = [kv.partition("=") for kv in arm.split(",")] if arm != "all jobs" else []
    names = [setting_name(k, v) for k, _, v in parts if k not in AXES]
    return "; ".join(dict.fromkeys(names)) or "as configured"


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


def generation_step(job: Job, row: dict) -> int:
    """The solver step a generation ran at (Fig. 20's x): its row's ``generation_step``; for rows of an
    older aes, ``(round - 1) x flywheel.proposer_interval``."""
    if isinstance(row.get("generation_step"), int):
        return row["generation_step"]
    return (row["round"] - 1) * (job.interval or 1)


def generation_points(jobs: list[Job]) -> dict[int, dict]:
    """``{solver step: {"generation", "values": [valid-env rate per job], "episodes": n, "idle": [why none
    ran]}}``, one per generation."""
    out: dict[int, dict] = {}
    for job in jobs:
        for row in job.rounds:
            if not isinstance(row.get("round"), int):
                continue
            point = out.setdefault(generation_step(job, row), {"generation": row["round"], "values": [], "episodes": 0,
                                                               "idle": []})
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
    """One per arm and generation: ``{"arm", "step", "generation", "episodes", "idle", **spread}``."""
    matched: list[int]
    """Update counts evaluated by every arm."""
    unmatched: dict[str, list[int]]
    """Per arm, the update counts it evaluated that some other arm did not."""
    curves: dict[str, dict] = field(default_factory=dict)
    """Per arm: ``{"eval": {metric: {update: spread}}, "valid": {step: spread}}`` (every point: the figure)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Per arm: its name in words (:func:`arm_label`)."""


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
        for step, point in sorted(generation_points(js).items()):
            row = {"arm": arm, "step": step, "generation": point["generation"], "episodes": point["episodes"],
                   "idle": sorted(set(point["idle"])), **spread(point["values"])}
            generation_rows.append(row)
            curves[arm]["valid"][step] = row
    unmatched = {arm: sorted(u - set(matched)) for arm, u in updates.items() if u - set(matched)}
    return Comparison(by_arm, eval_rows, generation_rows, matched, unmatched, curves,
                      {arm: arm_label(arm) for arm in by_arm})


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


def _wide(c: Comparison, rows: list[dict], x: str, cell) -> tuple[list[str], list[list[str]]]:
    """A table with one row per ``x`` value and one column per arm (by its name in words)."""
    names = list(c.arms)
    by = {(r[x], r["arm"]): r for r in rows}
    headers = [x, *(c.labels.get(a, a) for a in names)]
    return headers, [[str(value), *(cell(by[(value, a)]) if (value, a) in by else "-" for a in names)]
                     for value in sorted({r[x] for r in rows})]


@dataclass
class Section:
    """A titled table (or, without headers, a sentence) of the comparison: markdown and HTML alike."""

    title: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    text: str = ""


def table3(c: Comparison) -> list[Section]:
    """Table 3 as the paper lays it out, one per benchmark metric: per solver a row before training
    (update 0) and one per setting at the last update count every arm evaluated; a column per proposer."""
    if not c.matched:
        return []
    final = max(c.matched)
    jobs = [(arm, j) for arm, js in c.arms.items() for j in js]
    proposers = sorted({j.name_of("proposer") for _, j in jobs})
    metrics = sorted({key for _, j in jobs for key in eval_points([j])}, key=lambda m: (not m[0].startswith("avg"), m))
    out = []
    for metric, k in metrics:
        rows = []
        for solver in sorted({j.name_of("solver") for _, j in jobs}):
            def score(update: int, arm_jobs: list[Job], proposer: str) -> str:
                values = [v for j in arm_jobs if j.name_of("proposer") == proposer and j.name_of("solver") == solver
                          for v in eval_points([j]).get((metric, k), {}).get(update, [])]
                return _cell(spread(values)) if values else "-"

            everyone = [j for _, j in jobs]
            rows.append([f"{solver} (update 0, before training)", *(score(0, everyone, p) for p in proposers)])
            for setting in dict.fromkeys(setting_of(arm) for arm in c.arms):
                arm_jobs = [j for arm, j in jobs if setting_of(arm) == setting]
                rows.append([f"+ {setting}", *(score(final, arm_jobs, p) for p in proposers)])
        out.append(Section(f"Table 3: {metric} after {final} solver updates (the last count every arm evaluated)",
                           ["solver / setting", *(f"proposer {p}" for p in proposers)], rows))
    return out


def sections(c: Comparison) -> list[Section]:
    """Everything the comparison says, in order."""
    out = [Section("Arms", ["arm", "jobs", "seeds", "overrides that differ"],
                   [[c.labels[arm], str(len(js)), ", ".join(sorted({j.overrides.get("seed", "(default)") for j in js})),
                     arm] for arm, js in c.arms.items()],
                   "Cells: mean ± sample std [min, max] over the arm's jobs (n = jobs).")]
    out += table3(c)
    if c.eval_rows:
        for metric in sorted({r["metric"] for r in c.eval_rows}):
            headers, rows = _wide(c, [r for r in c.eval_rows if r["metric"] == metric], "update", _cell)
            out.append(Section(f"{metric} at every update count every arm evaluated", headers, rows))
    elif any(curve["eval"] for curve in c.curves.values()):
        out.append(Section("Benchmark", text="No update count was evaluated by every arm: the arms cannot be "
                                             "compared at matched updates."))
    else:
        out.append(Section("Benchmark", text="No eval rows in any job: run the sweep with eval.tasks=BENCHMARK_DIR "
                                             "(and eval.every=N)."))
    for arm, updates in c.unmatched.items():
        out.append(Section(f"{c.labels[arm]}: unmatched updates", text=f"{c.labels[arm]} also evaluated at update(s) "
                           f"{', '.join(map(str, updates))}, which not every arm reached."))
    if c.generation_rows:
        def valid(r: dict) -> str:
            if not r["jobs"]:
                return f"no episodes ({'; '.join(r['idle']) or 'none ran'})"
            return f"{_cell(r, percent=True)}, {r['episodes']} episodes"

        headers, rows = _wide(c, c.generation_rows, "step", valid)
        gen = {r["step"]: r["generation"] for r in c.generation_rows}
        out.append(Section("Fig. 20: valid-env rate of the generation at each solver step",
                           ["solver step", "generation", *headers[1:]],
                           [[row[0], str(gen[int(row[0])]), *row[1:]] for row in rows]))
    else:
        out.append(Section("Fig. 20: valid-env rate per solver step", text="No round rows in any job: no generation "
                                                                           "finished."))
    return out


def markdown(c: Comparison) -> str:
    lines = ["# Training comparison (Table 3, Fig. 20)", ""]
    for section in sections(c):
        lines += [f"## {section.title}", ""]
        if section.headers:
            lines.append(markdown_table(section.headers, section.rows))
        if section.text:
            lines += [section.text, ""]
    return "\n".join(lines) + "\n"


def html(c: Comparison) -> str:
    body = (f'<figure><img alt="Table 3 and Fig. 20" src="data:image/png;base64,{figure(c)}"></figure>')
    for i, section in enumerate(sections(c)):
        body += f"<h2>{esc(section.title)}</h2>"
        if section.headers:
            body += text_table(f"training-{i}", section.headers, section.rows)
        if section.text:
            body += f'<p class="small">{esc(section.text)}</p>'
    return document("Training comparison (Table 3, Fig. 20)", body, subtitle="the sweep's mode=run jobs (aes report)")


def csv_rows(c: Comparison) -> list[list]:
    out = []
    for r in c.eval_rows:
        out.append([r["arm"], c.labels[r["arm"]], r["metric"], "update", r["update"], r["jobs"], r["mean"], r["std"],
                    r["min"], r["max"], ""])
    for r in c.generation_rows:
        out.append([r["arm"], c.labels[r["arm"]], "valid_env_rate", "step", r["step"], r["jobs"], r["mean"], r["std"],
                    r["min"], r["max"], r["episodes"]])
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
                          linestyle="-" if metric.startswith("avg") else "--", label=f"{c.labels.get(arm, arm)}: {metric}")
                left.fill_between(xs, [p["min"] for p in points.values()], [p["max"] for p in points.values()],
                                  color=color, alpha=0.15, linewidth=0)
                drawn["left"] = True
            valid = {g: p for g, p in curve["valid"].items() if p["jobs"]}
            if valid:
                xs = list(valid)
                right.plot(xs, [p["mean"] for p in valid.values()], color=color, marker="o", label=c.labels.get(arm, arm))
                right.fill_between(xs, [p["min"] for p in valid.values()], [p["max"] for p in valid.values()],
                                   color=color, alpha=0.15, linewidth=0)
                drawn["right"] = True
        for ax, xlabel, ylabel, key, empty in (
                (left, "DPPO updates", "benchmark score", "left", "no eval rows (eval.tasks unset)"),
                (right, "solver step", "valid-env rate", "right", "no proposer episodes in any generation")):
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
        right.set_title("Valid-env rate per solver step (Fig. 20)", fontsize=10)
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
    out["training_html"].write_text(html(c))
    return out
