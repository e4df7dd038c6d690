"""``report.html``: the record of a run as plots (valid-env rate, cost, pool, rewards, DPPO)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from aes.report.metrics import read_metrics
from aes.paths import RunPaths


def _figure(draw) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.2), dpi=100)
    empty = draw(ax)
    if empty:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="gray")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _series(rows: list[dict], x: str, y: str) -> tuple[list, list]:
    pts = [(r[x], r[y]) for r in rows if r.get(x) is not None and r.get(y) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _line(rows: list[dict], x: str, ys: list[str], ylabel: str):
    def draw(ax) -> str | None:
        drawn = False
        for y in ys:
            xs, vs = _series(rows, x, y)
            if xs:
                ax.plot(xs, vs, marker="o", label=y)
                drawn = True
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        if drawn and len(ys) > 1:
            ax.legend(fontsize=8)
        return None if drawn else "no data yet"
    return draw


def _histogram(values: list[float]):
    def draw(ax) -> str | None:
        ax.set_xlabel("reward std across solver attempts")
        ax.set_ylabel("envs")
        if not values:
            return "no calibrated envs"
        ax.hist(values, bins=10, range=(0, 0.5), color="#4c72b0")
        return None
    return draw


def write_report(run_dir: Path, pool_envs: list[Any], title: str = "aes run") -> Path:
    """Render ``report.html`` from ``metrics.jsonl`` and the pool's envs."""
    rows = read_metrics(RunPaths(Path(run_dir)).metrics)
    rounds = [r for r in rows if r.get("event") == "round"]
    updates = [r for r in rows if r.get("event") == "update"]
    spreads = [e.std_reward for e in pool_envs if e.status == "admitted" and e.std_reward is not None]
    plots = [
        ("Valid-env rate per round", _line(rounds, "round", ["valid_env_rate"], "valid-env rate")),
        ("Cost per valid env per round", _line(rounds, "round", ["cost_per_valid_env"], "USD")),
        ("Reward spread of the admitted pool", _histogram(spreads)),
        ("Pool size over updates", _line(rounds, "updates", ["pool_size"], "admitted envs")),
        ("Solver reward over updates", _line(updates, "update", ["solver_reward_mean"], "mean reward")),
        ("DPPO masked fraction", _line(updates, "update", ["dppo/masked_fraction"], "fraction outside trust region")),
    ]
    evals = [r for r in rows if r.get("event") == "eval"]
    keys = sorted({k for r in evals for k in r if k.startswith(("eval/avg@", "eval/pass@"))})
    if keys:
        plots.append(("Benchmark during training", _line(evals, "update", keys, "score")))
    figures = "\n".join(f'<figure><figcaption>{html.escape(name)}</figcaption>'
                        f'<img src="data:image/png;base64,{_figure(draw)}"></figure>' for name, draw in plots)
    last = rounds[-1] if rounds else {}
    table = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(json.dumps(v))}</td></tr>"
                    for k, v in last.items())
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}} figure{{display:inline-block;margin:0.5em}}
figcaption{{font-weight:bold}} td{{padding:2px 8px;border-bottom:1px solid #ddd}}</style></head>
<body><h1>{html.escape(title)}</h1><p>{len(rounds)} round(s), {len(updates)} DPPO update(s),
{sum(e.status == 'admitted' for e in pool_envs)} admitted env(s).</p>{figures}
<h2>Last round</h2><table>{table}</table></body></html>"""
    out = RunPaths(Path(run_dir)).report
    out.write_text(page)
    return out
