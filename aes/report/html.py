"""``report.html``: the record of a run a researcher reads, written at the end of every run.

Sections: what happened (sentences derived from the data), plots (valid-env rate, admissions and
pool size, cost, solver reward, DPPO trust region, reward spread, refresh, evaluation), the rounds
as a table, the proposer's episodes (outcome, failed stage, the reason stored in the pool, a link
to the transcript), the pool (every env with its source, parent, attempts, mean, std, status and
links to its task files and trajectories) and the effective config (the command line, the sizes
summary and ``config.yaml``). Plots read right with one round and with hundreds
(:mod:`aes.report.plots`); an empty result is a sentence, not an empty axis. Links are relative
inside the run dir; the trajectory viewer (:mod:`aes.report.viewer`) is rebuilt beside it.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from aes.paths import RunPaths
from aes.report.page import BADGE, badge, document, duration, esc, link, num, pct, plural, rel, table, usd, when
from aes.report.plots import figure as _figure
from aes.report.plots import histogram, line_plot, points
from aes.report.rundata import STATUS_NAMES, RunData, counted, stage_text

log = logging.getLogger(__name__)

__all__ = ["write_report", "render", "_figure"]


def _plot(caption: str, draw=None, note: str = "", empty: str = "") -> str:
    """A figure, or the sentence ``empty`` when there is nothing to draw."""
    if draw is None:
        return (f'<figure class="none"><figcaption>{esc(caption)}</figcaption>'
                f'<p class="empty" style="max-width:30em">{esc(empty)}</p></figure>')
    note_html = f'<div class="note">{esc(note)}</div>' if note else ""
    return (f'<figure><figcaption>{esc(caption)}</figcaption><img alt="{esc(caption)}" '
            f'src="data:image/png;base64,{_figure(draw)}">{note_html}</figure>')


def _no_episodes(d: RunData, rounds: list[dict]) -> str:
    """Why these rounds ran no proposer episode, as their rows (or the config) say."""
    reasons = Counter(str(r.get("no_episodes") or "") for r in rounds)
    reasons.pop("", None)
    if not reasons:  # rows of a run from before the reason was recorded
        fly = d.config.get("flywheel") or {}
        return ("flywheel.assignments_per_round is 0 (a static pool)" if fly.get("assignments_per_round") == 0
                else "no assignment was opened: the pool had no room, or no parent env to build on")
    return "; ".join(reason if n == len(rounds) else f"{reason} ({plural(n, 'round')})"
                     for reason, n in reasons.most_common())


def _has(rows: list[dict], key: str) -> bool:
    return any(isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool) for r in rows)


# -- sections --------------------------------------------------------------------------------------
def _summary(d: RunData) -> str:
    facts = []
    fly = d.config.get("flywheel") or {}
    k = fly.get("proposer_interval")
    if d.rows:
        first, last = d.rows[0].get("time"), d.rows[-1].get("time")
        started = [p.stat().st_mtime for p in (d.paths.config, d.root / ".hydra" / "config.yaml") if p.is_file()]
        if started and first:  # config.yaml: when the run (or its last resume) started; .hydra/: its first start
            first = min(first, *started)
        span = ""
        if first and last:
            span = (f" from {when(first)} to {when(last)} ({duration(last - first)})" if last - first >= 1
                    else f", logged at {when(last)}")
        planned = f" of the {fly['rounds']} planned" if fly.get("rounds") and fly["rounds"] != len(d.rounds) else ""
        steps = f" of {plural(k, 'solver step')} each" if k else ""
        upd = d.updates[-1].get("update") if d.updates else 0
        text = (f"{plural(len(d.rounds), 'round')}{planned}{steps}: {plural(len(d.updates), 'DPPO update')}"
                f" (the policy is now version {upd or 0})")
        if d.no_updates:
            text += (f", and {plural(len(d.no_updates), 'step')} without an update (no group had rewards that differ "
                     "between attempts)")
        facts.append(text + span + ".")
    else:
        facts.append("No metrics yet: the run logged no step, round or evaluation (metrics.jsonl is empty or missing).")
    eps = d.episodes
    if eps:
        by = Counter(e.shown_outcome for e in eps)
        rounds = len({e.round for e in eps})
        if len(eps) == 1:
            facts.append(f"The proposer ran 1 episode (round {eps[0].round + 1}, parent "
                         f"{eps[0].parent_name or eps[0].parent_id}): {eps[0].reason}.")
        else:
            parts = [f"{by[o]} {o}" for o in ("admitted", "outside the band", "broken", "infrastructure", "interrupted",
                                              "open") if by.get(o)]
            facts.append(f"The proposer ran {plural(len(eps), 'episode')} in {plural(rounds, 'round')}: {', '.join(parts)}"
                         + (" (outside the band = passed every admission check but missed the calibration band)"
                            if by.get("outside the band") else "") + ".")
            stages = Counter(e.failed_stage for e in eps if e.failed_stage)
            if stages:
                facts.append(f"Episodes that were not admitted failed at: {counted(stages)}.")
    elif d.rounds:
        facts.append(f"The proposer ran no episodes: {_no_episodes(d, d.rounds)}.")
    facts.append(d.pool_sentence())
    if d.tampered:
        facts.append(f"{plural(d.tampered, 'solver attempt')} ended tampered: the tamper audit saw the verifier run "
                     "the agent's files (each scored 0; the paths are in its trajectory's detail).")
    if d.updates:
        rewards = [r["solver_reward_mean"] for r in d.updates if isinstance(r.get("solver_reward_mean"), (int, float))]
        if len(rewards) == 1:
            facts.append(f"Solver mean reward in the only update: {rewards[0]:.3f}.")
        elif rewards:
            facts.append(f"Solver mean reward per update: {rewards[0]:.3f} in the first, {rewards[-1]:.3f} in the last, "
                         f"{max(rewards):.3f} at best (over {plural(len(rewards), 'update')}).")
    if d.evals:
        last = d.evals[-1]
        scores = ", ".join(f"{k.split('/', 1)[1]} = {v:.3f}" for k, v in last.items()
                           if k.startswith("eval/") and k != "eval/tasks" and isinstance(v, (int, float)))
        facts.append(f"Benchmark at update {last.get('update')}: {scores} over {last.get('eval/tasks')} tasks.")
    if d.spend is not None:  # every session of the run, an interrupted one's calls included
        facts.append(f"Model calls so far: {plural(int(d.spend.get('model_calls') or 0), 'call')}, "
                     f"{num(d.spend.get('tokens'))} tokens, {usd(d.spend.get('cost_usd'))}.")
    elif d.rounds:
        last = d.rounds[-1]
        if last.get("tokens") is not None:
            facts.append(f"Model calls so far: {num(last.get('tokens'))} tokens, {usd(last.get('cost_usd'))}.")
    return '<ul class="facts">' + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>"


def _plots(d: RunData) -> str:
    rounds, updates = d.rounds, d.updates
    out = []
    no_round = "No round finished yet: the first round's row is written after its generation and solver steps."
    # valid-env rate (None in a round without episodes: no rate, not 0%)
    idle = [r for r in rounds if not r.get("episodes")]
    if _has(rounds, "valid_env_rate"):
        xs, ys = points(rounds, "round", "valid_env_rate")
        note = "valid = the finally submitted env passed admission checks 1-4 (it builds, its reference scores 1, " \
               "doing nothing scores < 0.5)"
        if idle:
            note += (f"; no point for {plural(len(idle), 'round')} without proposer episodes "
                     f"({_no_episodes(d, idle)})")
        out.append(_plot("Valid-env rate per round", line_plot([("valid-env rate", xs, ys)], "round",
                                                               "episodes with a valid env", (0, 1), percent=True),
                         note))
    else:
        out.append(_plot("Valid-env rate per round", empty=no_round if not rounds else
                         f"No proposer episode ran in any round ({_no_episodes(d, idle or rounds)}), so there is "
                         "no valid-env rate."))
    # admissions and pool size
    if _has(rounds, "pool_size"):
        series = [("admitted envs in the pool", *points(rounds, "round", "pool_size"))]
        if _has(rounds, "entered_pool"):
            series.append(("entered the pool this round", *points(rounds, "round", "entered_pool")))
        out.append(_plot("Pool size and admissions per round", line_plot(series, "round", "envs"),
                         "entered the pool: envs of the round's episodes that joined it (in the band, and room)"))
    else:
        out.append(_plot("Pool size and admissions per round", empty=no_round))
    # cost
    if _has(rounds, "cost_per_valid_env") and any((r.get("cost_per_valid_env") or 0) > 0 for r in rounds):
        xs, ys = points(rounds, "round", "cost_per_valid_env")
        out.append(_plot("Cost per valid env per round", line_plot([("USD per valid env", xs, ys)], "round", "USD")))
    elif _has(rounds, "tokens_per_valid_env") and any((r.get("tokens_per_valid_env") or 0) > 0 for r in rounds):
        xs, ys = points(rounds, "round", "tokens_per_valid_env")
        out.append(_plot("Tokens per valid env per round", line_plot([("tokens per valid env", xs, ys)], "round",
                                                                     "tokens"),
                         "the models cost nothing (local or simulated), so tokens instead of USD"))
    elif rounds:
        spent = rounds[-1]
        out.append(_plot("Cost per valid env per round", empty=(
            f"No valid env yet, so no cost per valid env; the run has spent {num(spent.get('tokens'))} tokens "
            f"({usd(spent.get('cost_usd'))}) so far." if not any(r.get("valid_env_rate") for r in rounds)
            else "The proposer's model calls cost nothing and counted no tokens (a scripted proposer).")))
    # solver reward
    if _has(updates, "solver_reward_mean"):
        xs, ys = points(updates, "update", "solver_reward_mean")
        out.append(_plot("Solver reward per update", line_plot([("mean reward of the trained groups", xs, ys)],
                                                                "update", "mean reward", (0, 1))))
    else:
        out.append(_plot("Solver reward per update", empty="No DPPO update yet." if not updates else
                         "No update row holds solver_reward_mean."))
    # DPPO trust region
    if _has(updates, "dppo/masked_fraction"):
        xs, ys = points(updates, "update", "dppo/masked_fraction")
        out.append(_plot("DPPO: tokens outside the trust region", line_plot(
            [("masked fraction", xs, ys)], "update", "fraction of tokens masked"),
            "the fraction of policy tokens whose probability moved more than delta since the rollout"))
    elif updates:
        out.append(_plot("DPPO: tokens outside the trust region", empty=(
            "This trainer reports no trust-region statistics (dppo/masked_fraction): the simulated trainer of "
            "experiment=simulated has no token probabilities." if _has(updates, "dppo/skill") else
            "No update row holds dppo/masked_fraction.")))
    # reward spread
    admitted = [r for r in d.envs if r.env.status == "admitted"]
    spread = [r.std for r in admitted if r.std is not None]
    calibrated = sum(1 for r in admitted if r.env.std_reward is not None)
    if spread:
        from_rollouts = len(spread) - calibrated
        note = (f"{plural(calibrated, 'env')} from calibration"
                + (f", {from_rollouts} from their newest solver rollouts (seeds are admitted without calibration)"
                   if from_rollouts else "") + f"; {len(admitted) - len(spread)} admitted env(s) not rolled out yet")
        out.append(_plot("Reward spread of the admitted pool", histogram(
            spread, "reward std across solver attempts", "envs"), note))
    else:
        seeds = sum(1 for r in admitted if r.env.source == "seed")
        out.append(_plot("Reward spread of the admitted pool", empty=(
            f"No calibrated envs yet: {plural(seeds, 'seed env')} {'is' if seeds == 1 else 'are'} admitted (seeds join "
            "without calibration) and none has been rolled out." if seeds else
            "No admitted env has a reward spread yet (none calibrated or rolled out).")))
    # refresh
    if d.refreshes:
        series = [(key, *points(d.refreshes, "update", key)) for key in ("left_band", "retired", "pool")]
        out.append(_plot("Pool refreshes", line_plot(series, "update", "envs"),
                         "after every trainer.updates_per_refresh updates: envs that left the band, envs retired"))
    # evaluation
    keys = sorted({k for r in d.evals for k in r if k.startswith(("eval/avg@", "eval/pass@"))})
    if keys:
        series = [(k.split("/", 1)[1], *points(d.evals, "update", k)) for k in keys]
        out.append(_plot("Benchmark during training", line_plot(series, "update", "score", (0, 1))))
    return "".join(out)


def _rounds_table(d: RunData) -> str:
    if not d.rounds:
        return '<p class="empty">No round finished yet.</p>'
    rows = []
    for r in d.rounds:
        failures = r.get("failures_by_stage") if isinstance(r.get("failures_by_stage"), dict) else {}
        valid = r.get("valid_env_rate")
        shown = pct(valid) if valid is not None else (
            f'<span class="muted" title="{esc(_no_episodes(d, [r]))}">no episodes</span>' if not r.get("episodes")
            else "-")
        rows.append([num(r.get("round")), num(r.get("updates")), num(r.get("assignments/rollout_update")),
                     num(r.get("assignments/count")), num(r.get("episodes")),
                     (shown, valid if valid is not None else -1), num(r.get("accepted", r.get("admitted"))),
                     num(r.get("entered_pool")), esc(counted(failures)) or '<span class="muted">none</span>',
                     num(r.get("pool_size")),
                     num(r.get("solver_reward_mean")), num(r.get("tokens")), (usd(r.get("cost_usd")), r.get("cost_usd") or 0),
                     (esc(when(r.get("time"))), r.get("time") or 0)])
    cols = [("round", "num"), ("updates", "num"), ("rollouts of", "num"), ("assignments", "num"), ("episodes", "num"),
            ("valid", "num"), ("accepted", "num"), ("entered pool", "num"), ("failed at", ""), ("pool", "num"),
            ("solver reward", "num"),
            ("tokens", "num"), ("cost", "num"), ("finished", "")]
    return ('<p class="small muted">updates: DPPO updates so far (the policy version); rollouts of: the policy '
            'version whose rollouts the assignments read; valid: the share of episodes whose env passed admission '
            'checks 1-4 (the valid-env rate); accepted: envs that passed checks 1-6; entered pool: envs that joined '
            'the pool (in the band, with room); failed at: the stage of every rejected draft; tokens and cost: the '
            'run\'s total so far.</p>' + table("rounds-table", cols, rows))


def _episodes_table(d: RunData, viewer: Any) -> str:
    if not d.episodes:
        return '<p class="empty">No proposer episodes in this run.</p>'
    here = d.root
    rows = []
    for e in sorted(d.episodes, key=lambda x: (x.round, x.assignment_id)):
        page = viewer.page_of(e.trajectory) if (viewer is not None and e.trajectory) else None
        transcript = (link(rel(page, here), "transcript") if page else
                      link(rel(e.trajectory, here), "JSON") if e.trajectory else '<span class="muted">none</span>')
        parent = link(f"#env-{e.parent_id}", e.parent_name or e.parent_id) if e.parent_id else "-"
        env = link(f"#env-{e.env_id}", e.env_id) if e.env_id else '<span class="muted">none</span>'
        rows.append([esc(e.assignment_id), num(e.round + 1), parent, esc(e.direction or ""), badge(e.shown_outcome),
                     esc(stage_text(e.failed_stage)), esc(e.reason), env, num(e.revisions), num(e.turns),
                     num(e.tokens), transcript])
    cols = [("assignment", ""), ("round", "num"), ("parent", ""), ("build", ""), ("outcome", ""), ("failed stage", ""),
            ("what happened", ""), ("env", ""), ("revisions", "num"), ("turns", "num"), ("tokens", "num"),
            ("transcript", "")]
    return table("episodes-table", cols, rows)


def _pool_table(d: RunData, viewer: Any) -> str:
    if not d.envs:
        return '<p class="empty">The pool is empty.</p>'
    here = d.root
    from aes.report.rundata import STATUS_ORDER

    rows = []
    for r in sorted(d.envs, key=lambda x: (STATUS_ORDER.get(x.env.status, 9), x.env.round, x.env.created_at)):
        e = r.env
        files = rel(e.path, here)
        links = [link(files + "/", "files"), link(f"{files}/instruction.md", "instruction"),
                 link(f"{files}/task.toml", "task.toml")]
        env_page = viewer.env_page(e.env_id) if viewer is not None else None
        if env_page is not None:
            links.append(link(rel(env_page, here), f"{r.rollouts.attempts} trajectories"))
        note = r.failure or (f"from {r.stats_source}" if r.stats_source else "")
        parent = link(f"#env-{e.parent_id}", e.parent_id) if e.parent_id else "-"
        rows.append([f'<a id="env-{esc(e.env_id)}"></a>{esc(e.env_id)}<div class="muted small">{esc(e.name)}</div>',
                     esc(e.source), parent, num(e.round + 1) if e.source != "seed" else "-", num(r.rollouts.attempts),
                     (num(r.mean), r.mean if r.mean is not None else -1), (num(r.std), r.std if r.std is not None else -1),
                     badge(STATUS_NAMES.get(e.status, e.status), BADGE.get(e.status)), esc(note), " · ".join(links)])
    cols = [("env", ""), ("source", ""), ("parent", ""), ("round", "num"), ("attempts", "num"), ("mean", "num"),
            ("std", "num"), ("status", ""), ("verdict / note", ""), ("links", "")]
    counts = Counter(r.env.status for r in d.envs)
    head = ", ".join(f"{counts[s]} {STATUS_NAMES[s]}" for s in ("admitted", "calibrated", "valid", "proposed", "invalid",
                                                                "retired") if counts.get(s))
    return (f'<p>{plural(len(d.envs), "env")}: {esc(head)}. Attempts: every solver attempt on the env in this run; '
            'mean and std: from calibration when it had one, else from the newest solver rollouts.</p>'
            + table("pool-table", cols, rows))


def _config(d: RunData) -> str:
    parts = []
    if d.overrides:
        parts.append("<p>Command line:</p>" + f"<pre>python -m aes.run {esc(' '.join(d.overrides))}</pre>")
    elif d.config_text:
        parts.append('<p class="muted">No command-line overrides were recorded (.hydra/overrides.yaml): the defaults.</p>')
    parts.append("<h3>Effective sizes</h3>" + f"<pre>{esc(d.sizes())}</pre>")
    if d.config_text:
        parts.append(f"<details><summary>config.yaml (the resolved, typed config of this run)</summary>"
                     f"<pre>{esc(d.config_text)}</pre></details>")
    else:
        parts.append('<p class="empty">No config.yaml in this run dir.</p>')
    return "".join(parts)


def _files(d: RunData, viewer: Any) -> str:
    here = d.root
    items = []
    for name, path in (("metrics.jsonl", d.paths.metrics), ("config.yaml", d.paths.config),
                       ("trajectories/index.jsonl", d.paths.index), ("run.log", here / "run.log"),
                       ("proposer/", d.paths.proposer), ("pool/", d.paths.pool)):
        if path.exists():
            items.append(link(rel(path, here) + ("/" if path.is_dir() else ""), name))
    if viewer is not None:
        items.insert(0, link(rel(viewer.index, here), "trajectory viewer"))
    return "<p>" + " · ".join(items) + "</p>"


def render(d: RunData, title: str, viewer: Any = None) -> str:
    nav = " ".join(link(f"#{anchor}", text) for anchor, text in (
        ("summary", "summary"), ("plots", "plots"), ("rounds", "rounds"), ("episodes", "proposer episodes"),
        ("pool", "pool"), ("config", "config")))
    if viewer is not None:
        nav += " " + link(rel(viewer.index, d.root), "trajectories")
    body = (f'<h2 id="summary">What happened</h2>{_summary(d)}'
            f'<h2 id="plots">Plots</h2>{_plots(d)}'
            f'<h2 id="rounds">Rounds ({len(d.rounds)})</h2>{_rounds_table(d)}'
            f'<h2 id="episodes">Proposer episodes ({len(d.episodes)})</h2>{_episodes_table(d, viewer)}'
            f'<h2 id="pool">Pool ({len(d.envs)} envs)</h2>{_pool_table(d, viewer)}'
            f'<h2 id="config">Config</h2>{_config(d)}'
            f'<h2 id="files">Files</h2>{_files(d, viewer)}')
    mode = d.config.get("mode")
    sub = esc(str(d.root)) + (f" · mode={esc(mode)}" if mode else "")
    for section in ("proposer", "solver", "harness"):
        name = (d.config.get(section) or {}).get("name") if isinstance(d.config.get(section), dict) else None
        if name:
            sub += f" · {section}={esc(name)}"
    return document(title, body, nav, sub)


def write_report(run_dir: Path, pool_envs: list[Any] | None = None, title: str = "aes run",
                 viewer: bool = True) -> Path:
    """Render ``report.html`` (and, with ``viewer``, rebuild the trajectory viewer beside it)."""
    data = RunData(Path(run_dir), pool_envs)
    built = None
    if viewer:
        from aes.report.viewer import build

        try:
            built = build(data.root, reasons={e.assignment_id: e.reason for e in data.episodes})
        except Exception as exc:  # noqa: BLE001 - the report is written without the viewer's links
            log.warning("report: the trajectory viewer could not be built (%s); links go to the raw JSON", exc)
    out = RunPaths(Path(run_dir)).report
    tmp = out.with_name(".report.html.tmp")
    tmp.write_text(render(data, title, built))
    tmp.replace(out)
    return out
