"""A static viewer for the ATIF trajectories of a run dir (``aes view RUN_DIR``).

Writes HTML, by default into ``RUN_DIR/viewer/``:

- ``index.html``: the proposer's episodes (outcome, failed stages, turns) and the solver's
  attempts by env, one row per env (attempts, batches, policy versions, newest mean reward);
- ``env/<env_id>.html``: that env's attempts by solver and batch: reward, outcome, end reason,
  policy version, turns, each linking to its page;
- one page per trajectory (``solver/...``, ``proposer/...``, ``probes/...``): the conversation
  step by step — system prompt, user messages, each agent message with its tool call (the shell
  command) and observation (output, exit code, time), tokens and policy version per step — then
  the reward, the verifier's output and the run-level facts; a link to the raw JSON.

Pages are rendered again only when their trajectory (or this module) changed, so the report can
rebuild the viewer at the end of every run. Links are relative: the pages open from disk and
from ``aes view RUN_DIR --serve PORT``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aes.paths import PROBE, RunPaths
from aes.report.page import (badge, document, esc, jsonish, kv, link, num, plural, rel, reward_badge, table,
                             usd)
from aes.report.rundata import end_reason_text
from aes.rewards import task_reward

log = logging.getLogger(__name__)

CACHE = ".summaries.json"
SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(part: str) -> str:
    return SAFE.sub("_", part).strip(".") or "_"


@dataclass
class Entry:
    """One trajectory file and what the index shows of it."""

    kind: str
    """solver, proposer, infrastructure or probe."""
    source: Path
    page: Path
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Viewer:
    root: Path
    out: Path
    entries: list[Entry]
    rendered: int = 0

    @property
    def index(self) -> Path:
        return self.out / "index.html"

    def env_page(self, env_id: str) -> Path | None:
        page = self.out / "env" / f"{_safe(env_id)}.html"
        return page if page.is_file() else None

    def page_of(self, source: Path) -> Path | None:
        return self._pages.get(Path(source).resolve())

    @functools.cached_property
    def _pages(self) -> dict[Path, Path]:
        """Each trajectory's page by its resolved path, built once (the report asks per episode)."""
        return {entry.source.resolve(): entry.page for entry in self.entries}


# -- reading trajectories ------------------------------------------------------------------------
def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"_error": f"{type(exc).__name__}: {exc}"}
    return data if isinstance(data, dict) else {"_error": "not a JSON object"}


def _versions(data: dict) -> list[int]:
    found = {s.get("extra", {}).get("policy_version") for s in data.get("steps") or [] if isinstance(s.get("extra"), dict)}
    return sorted(v for v in found if isinstance(v, int))


def summarize(data: dict) -> dict[str, Any]:
    """The index's facts of one trajectory."""
    extra = data.get("extra") if isinstance(data.get("extra"), dict) else {}
    steps = data.get("steps") or []
    agent_steps = [s for s in steps if s.get("source") == "agent"]
    fm = data.get("final_metrics") or {}
    return {
        "reward": task_reward(extra), "outcome": extra.get("outcome"),
        "end_reason": extra.get("end_reason") or ", ".join(extra.get("end_reasons") or []),
        "turns": len(agent_steps), "steps": len(steps), "versions": _versions(data),
        "env_id": extra.get("env_id"), "task": extra.get("task"), "attempt": extra.get("attempt"),
        "failure": extra.get("failure"), "simulated": bool(extra.get("simulated")),
        "tokens": (fm.get("total_prompt_tokens") or 0) + (fm.get("total_completion_tokens") or 0),
        "failed_stages": extra.get("failed_stages"), "round": (extra.get("assignment") or {}).get("round"),
        "parent": (extra.get("assignment") or {}).get("parent_name"), "error": data.get("_error"),
    }


def _collect(paths: RunPaths, out: Path) -> list[Entry]:
    entries = []
    if paths.trajectories.is_dir():
        for src in sorted(paths.trajectories.rglob("*.json")):
            rel_parts = src.relative_to(paths.trajectories).with_suffix(".html").parts
            kind = "probe" if rel_parts[0].startswith(f"{PROBE}-") else "solver"  # the proposer's solver_model runs
            entries.append(Entry(kind, src, out.joinpath("probes" if kind == "probe" else "solver",
                                                         *map(_safe, rel_parts))))
    for kind, folder, sub in (("proposer", paths.proposer_trajectories, "proposer"),
                              ("infrastructure", paths.infrastructure_failures, "proposer/infrastructure")):
        for src in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            entries.append(Entry(kind, src, out / sub / f"{_safe(src.stem)}.html"))
    return entries


# -- pages ---------------------------------------------------------------------------------------
def _pre(text: Any, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


def _tool_call(call: dict) -> str:
    name = call.get("function_name") or call.get("name") or "tool"
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    if name == "bash" and isinstance(args, dict) and "command" in args:
        body = _pre(f"$ {args['command']}")
    elif not args:
        body = _pre(f"{name}")
    elif isinstance(args, dict) and all(isinstance(v, (str, int, float)) for v in args.values()):
        body = _pre(f"{name} " + " ".join(f"{v}" if k in ("path", "env", "draft") else f"{k}={v}" for k, v in args.items()))
    else:
        body = _pre(f"{name}({json.dumps(args, ensure_ascii=False, indent=1)})")
    return f'<div class="tool"><span class="label">tool call · {esc(name)}</span>{body}</div>'


def _observation(obs: dict) -> str:
    parts = []
    for result in obs.get("results") or []:
        extra = result.get("extra") or {}
        facts = []
        if "exit_code" in extra:
            code = extra["exit_code"]
            facts.append(badge(f"exit code {code}", "ok" if code == 0 else "bad") if code is not None
                         else badge("no exit code (the shell ended)", "warn"))
        if extra.get("timed_out"):
            facts.append(badge("timed out", "bad"))
        if isinstance(extra.get("seconds"), (int, float)):
            facts.append(f'<span class="muted small">{extra["seconds"]:.2f} s</span>')
        others = {k: v for k, v in extra.items() if k not in ("exit_code", "timed_out", "seconds")}
        if others:
            facts.append(f'<span class="muted small">{jsonish(others)}</span>')
        content = result.get("content")
        if isinstance(content, list):  # ATIF allows content parts
            content = "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content)
        parts.append(f'<div class="obs"><span class="label">observation</span> {" ".join(facts)}'
                     f'{_pre(content if content not in (None, "") else "(no output)")}</div>')
    return "".join(parts)


def _step(step: dict) -> str:
    source = str(step.get("source") or "?")
    head = [f'<span class="label">{esc(source)}</span>', f'<span class="muted">step {esc(step.get("step_id", "?"))}</span>']
    metrics = step.get("metrics") or {}
    extra = step.get("extra") if isinstance(step.get("extra"), dict) else {}
    if source == "agent":
        if step.get("model_name"):
            head.append(esc(step["model_name"]))
        if metrics:
            lp = metrics.get("logprobs")
            head.append(f'{num(metrics.get("prompt_tokens"))} prompt + {num(metrics.get("completion_tokens"))} completion tokens'
                        + (" (with log-probs)" if isinstance(lp, list) and lp else ""))
            if metrics.get("cost_usd"):
                head.append(usd(metrics["cost_usd"]))
        if extra.get("policy_version") is not None:
            head.append(f"policy v{esc(extra['policy_version'])}")
        if isinstance(extra.get("latency_sec"), (int, float)):
            head.append(f"{extra['latency_sec']:.1f} s")
        if extra.get("finish_reason") and extra["finish_reason"] != "stop":
            head.append(badge(f"finish: {extra['finish_reason']}", "warn"))
    if step.get("timestamp"):
        head.append(f'<span class="muted small">{esc(str(step["timestamp"])[:19].replace("T", " "))}</span>')
    body = []
    message = step.get("message")
    if isinstance(message, list):
        message = "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in message)
    if message not in (None, ""):
        body.append(_pre(message))
    elif source == "agent":
        body.append('<p class="empty">(empty reply)</p>')
    if step.get("reasoning_content"):
        body.append(f"<details><summary>reasoning</summary>{_pre(step['reasoning_content'])}</details>")
    for call in step.get("tool_calls") or []:
        body.append(_tool_call(call))
    if isinstance(step.get("observation"), dict):
        body.append(_observation(step["observation"]))
    return (f'<section class="step {esc(source)}" id="step-{esc(step.get("step_id", ""))}">'
            f'<div class="head">{" ".join(head)}</div><div class="body">{"".join(body)}</div></section>')


SOLVER_FACTS = ("task", "env_id", "solver", "attempt", "reward", "outcome", "end_reason", "turns", "failure",
                "detail", "hints", "error")
PROPOSER_FACTS = ("harness", "outcome", "env_id", "revisions", "failed_stages", "end_reasons", "turns", "note",
                  "infrastructure_error", "error")
SHOWN_ELSEWHERE = {"verifier_stdout", "rewards", "timings", "assignment", "simulated", "fenced_mode"}


def _facts(data: dict, entry: Entry, viewer_out: Path, report: Path, reason: str = "") -> str:
    extra = data.get("extra") if isinstance(data.get("extra"), dict) else {}
    agent = data.get("agent") or {}
    page_dir = entry.page.parent
    rows: list[tuple[str, str]] = [("agent", esc(" · ".join(str(x) for x in (agent.get("name"), agent.get("model_name"))
                                                             if x)))]
    if reason:
        rows.append(("what happened", f"<b>{esc(reason)}</b>"))
    keys = PROPOSER_FACTS if entry.kind in ("proposer", "infrastructure") else SOLVER_FACTS
    for key in keys:
        if key not in extra or extra[key] in (None, "", []):
            continue
        value = extra[key]
        if key == "reward":
            cell = reward_badge(value)
        elif key == "outcome":
            cell = badge(value)
        elif key == "end_reason":
            cell = f"{esc(value)} <span class='muted'>({esc(end_reason_text(value))})</span>"
        elif key == "end_reasons":
            cell = "; ".join(f"{esc(v)} <span class='muted'>({esc(end_reason_text(v))})</span>" for v in value)
        elif key in ("failed_stages",) and isinstance(value, list):
            cell = esc(", ".join(str(v) for v in value))
        elif key == "env_id":
            cell = link(rel(report, page_dir) + f"#env-{value}", value, "this env in the report's pool table")
        else:
            cell = jsonish(value)
        rows.append((key.replace("_", " "), cell))
    versions = _versions(data)
    if versions:
        rows.append(("policy version", esc(", ".join(f"v{v}" for v in versions))))
    assignment = extra.get("assignment") or {}
    if assignment:
        rows.append(("assignment", esc(
            f"{assignment.get('assignment_id', '')}: round {int(assignment.get('round', 0)) + 1}, build "
            f"{assignment.get('direction', '?')} than {assignment.get('parent_name') or assignment.get('parent_env_id')} "
            f"(solver mean reward {assignment.get('mean_reward')}, most common failure: "
            f"{assignment.get('most_common_failure')})")))
    fm = data.get("final_metrics") or {}
    if fm:
        rows.append(("tokens", esc(f"{num(fm.get('total_prompt_tokens'))} prompt ({num(fm.get('total_cached_tokens'))} cached)"
                                   f", {num(fm.get('total_completion_tokens'))} completion; {usd(fm.get('total_cost_usd'))}")))
    if extra.get("timings"):
        rows.append(("timings", esc(", ".join(f"{k} {v:.1f} s" for k, v in extra["timings"].items()
                                               if isinstance(v, (int, float))))))
    others = {k: v for k, v in extra.items() if k not in (*keys, *SHOWN_ELSEWHERE)}
    for key, value in others.items():
        rows.append((key.replace("_", " "), _hil(value) if key == "hil" else jsonish(value)))
    return kv(rows)


def _hil(record: Any) -> str:
    """A HiL attempt's questions, each with the judge's verdict and the reply, then its Ask-F1."""
    if not isinstance(record, dict) or not isinstance(record.get("asked"), list):
        return jsonish(record)
    rows = []
    for entry in record["asked"]:
        entry = entry if isinstance(entry, dict) else {}
        matched, new = entry.get("matched") or [], entry.get("new")
        verdict = ("too broad: " + ", ".join(map(str, entry["too_broad"]))) if entry.get("too_broad") else (
            ", ".join(map(str, matched)) + ("" if new is None or new else " (asked before)") if matched else "none")
        rows.append(f"<li>{esc(entry.get('question'))} <span class='muted'>&rarr; {esc(verdict)}: "
                    f"{esc(entry.get('reply'))}</span></li>")
    scores = {k: record.get(k) for k in ("setting", "questions", "revealed", "precision", "recall", "ask_f1")}
    return f"<ol>{''.join(rows)}</ol>{jsonish(scores)}"


def _trajectory_page(data: dict, entry: Entry, viewer: Viewer, report: Path, reason: str = "") -> str:
    extra = data.get("extra") if isinstance(data.get("extra"), dict) else {}
    page_dir = entry.page.parent
    raw = rel(entry.source, page_dir)
    nav = [link(rel(viewer.index, page_dir), "all trajectories"), link(rel(report, page_dir), "report")]
    if entry.kind == "solver" and extra.get("env_id"):
        nav.append(link(rel(viewer.out / "env" / f"{_safe(extra['env_id'])}.html", page_dir), f"attempts on {extra['env_id']}"))
    nav.append(link(raw, "raw JSON"))
    if "_error" in data:
        body = f'<p class="empty">This file could not be read: {esc(data["_error"])}.</p>'
        return document(entry.source.name, body, " ".join(nav))
    if entry.kind in ("proposer", "infrastructure"):
        title = f"proposer episode {entry.source.stem}"
        sub = f"{extra.get('harness', '')} harness · outcome {extra.get('outcome') or 'none (not scored)'}"
    else:
        title = f"{extra.get('task') or extra.get('env_id') or entry.source.stem} · attempt {extra.get('attempt', entry.source.stem)}"
        sub = f"reward {extra.get('reward')} · {extra.get('outcome', '')} · ended: {extra.get('end_reason', '?')}"
    parts = [_facts(data, entry, viewer.out, report, reason)]
    steps = data.get("steps") or []
    parts.append(f"<h2>Conversation ({plural(len(steps), 'step')})</h2>")
    if steps:
        parts += [_step(s) for s in steps]
    elif extra.get("simulated"):
        parts.append('<p class="empty">No steps: a simulated attempt (experiment=simulated). The scripted solver draws '
                     f'its reward from its skill ({esc(extra.get("skill"))}) and the task\'s difficulty; there is no '
                     'conversation to show.</p>')
    else:
        parts.append('<p class="empty">No steps were recorded for this episode.</p>')
    if entry.kind not in ("proposer", "infrastructure"):
        parts.append("<h2>Verifier</h2>")
        rewards = extra.get("rewards")
        parts.append(kv([("reward", reward_badge(task_reward(extra))),
                         ("rewards", jsonish(rewards) if rewards else ""),
                         ("outcome", badge(extra["outcome"]) if extra.get("outcome") else "")]))
        stdout = extra.get("verifier_stdout")
        parts.append(_pre(stdout) if stdout else '<p class="empty">The verifier printed nothing.</p>')
    return document(title, "".join(parts), " ".join(nav), esc(sub))


def _outcome_cell(summary: dict) -> str:
    return badge(summary.get("outcome") or "-")


def _env_pages(viewer: Viewer, report: Path, index_rows: list[dict]) -> dict[str, dict]:
    """Write env/<env_id>.html for every env with solver attempts; per env, the index row's facts."""
    versions_of: dict[str, int] = {}
    for row in index_rows:
        for p in row.get("paths") or []:
            versions_of[p] = row.get("policy_version")
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for entry in viewer.entries:
        if entry.kind == "solver":
            parts = entry.source.relative_to(RunPaths(viewer.root).trajectories).parts
            by_env[entry.summary.get("env_id") or parts[0]].append(entry)
    facts = {}
    for env_id, entries in sorted(by_env.items()):
        page = viewer.out / "env" / f"{_safe(env_id)}.html"
        groups: dict[tuple[str, str], list[Entry]] = defaultdict(list)
        for e in entries:
            parts = e.source.relative_to(RunPaths(viewer.root).trajectories).parts
            solver = parts[1] if len(parts) > 2 else "?"
            batch = "/".join(parts[2:-1]) or "-"
            groups[(solver, batch)].append(e)
        rows = []
        all_versions = set()
        for (solver, batch), es in sorted(groups.items(), key=lambda kv_: (kv_[0][0], _batch_key(kv_[0][1]))):
            for e in sorted(es, key=lambda x: _attempt_key(x.source.stem)):
                s = e.summary
                relpath = e.source.relative_to(RunPaths(viewer.root).trajectories).as_posix()
                version = versions_of.get(relpath)
                vs = s.get("versions") or ([version] if version is not None else [])
                all_versions.update(vs)
                reward = s.get("reward")
                rows.append([esc(solver), esc(batch), (link(rel(e.page, page.parent), f"attempt {e.source.stem}"),
                                                       _attempt_key(e.source.stem)[0]),
                             (reward_badge(reward), reward if isinstance(reward, (int, float)) else -1),
                             _outcome_cell(s), esc(s.get("end_reason") or ""), esc(", ".join(f"v{v}" for v in vs)),
                             num(s.get("turns")), esc(s.get("failure") or "")])
        rewards = [e.summary["reward"] for e in entries if isinstance(e.summary.get("reward"), (int, float))]
        facts[env_id] = {"attempts": len(entries), "batches": len(groups), "solvers": sorted({k[0] for k in groups}),
                         "versions": sorted(all_versions), "mean": sum(rewards) / len(rewards) if rewards else None,
                         "task": next((e.summary.get("task") for e in entries if e.summary.get("task")), "")}
        cols = [("solver", ""), ("batch", ""), ("attempt", ""), ("reward", "num"), ("outcome", ""), ("ended", ""),
                ("policy", ""), ("turns", "num"), ("failure", "")]
        body = (f'<p>{plural(len(entries), "solver attempt")} in {plural(len(groups), "batch", "batches")} '
                f'(a batch is one rollout call: <code>u&lt;policy version&gt;-...</code>). Mean reward over all of them: '
                f'{num(facts[env_id]["mean"])}.</p>' + table("attempts-table", cols, rows))
        nav = " ".join([link(rel(viewer.index, page.parent), "all trajectories"),
                        link(rel(report, page.parent) + f"#env-{env_id}", "this env in the report")])
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(document(f"{facts[env_id]['task'] or env_id}: solver attempts", body, nav, esc(env_id)))
    return facts


def _batch_key(batch: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", batch))


def _attempt_key(stem: str) -> tuple:
    return (int(stem), "") if stem.isdigit() else (10**9, stem)


def _index_page(viewer: Viewer, report: Path, env_facts: dict[str, dict]) -> str:
    out = viewer.out
    parts = []
    proposer = [e for e in viewer.entries if e.kind in ("proposer", "infrastructure")]
    parts.append(f"<h2 id='proposer'>Proposer episodes ({len(proposer)})</h2>")
    if proposer:
        rows = []
        for e in sorted(proposer, key=lambda x: (x.summary.get("round") or 0, x.source.stem)):
            s = e.summary
            outcome = s.get("outcome") or ("infrastructure" if e.kind == "infrastructure" else "-")
            rows.append([link(rel(e.page, out), e.source.stem), num((s.get("round") or 0) + 1), esc(s.get("parent") or ""),
                         badge(outcome), esc(", ".join(s.get("failed_stages") or [])), num(s.get("turns")),
                         esc(s.get("end_reason") or ""), num(s.get("tokens"))])
        parts.append(table("episodes-table", [("episode", ""), ("round", "num"), ("parent", ""), ("outcome", ""),
                                        ("failed stages", ""), ("turns", "num"), ("ended", ""), ("tokens", "num")], rows))
    else:
        parts.append('<p class="empty">No proposer trajectories in this run dir (no generation ran, or this run '
                     'has no proposer).</p>')
    solver = [e for e in viewer.entries if e.kind == "solver"]
    parts.append(f"<h2 id='solver'>Solver attempts ({len(solver)}) on {plural(len(env_facts), 'env')}</h2>")
    if env_facts:
        rows = []
        for env_id, f in sorted(env_facts.items()):
            page = out / "env" / f"{_safe(env_id)}.html"
            vs = f["versions"]
            rows.append([link(rel(page, out), env_id), esc(f["task"]), esc(", ".join(f["solvers"])), num(f["attempts"]),
                         num(f["batches"]), esc(f"v{vs[0]}–v{vs[-1]}" if len(vs) > 1 else f"v{vs[0]}" if vs else ""),
                         num(f["mean"])])
        parts.append(table("envs-table", [("env", ""), ("task", ""), ("solver", ""), ("attempts", "num"), ("batches", "num"),
                                    ("policy versions", ""), ("mean reward", "num")], rows))
    else:
        parts.append('<p class="empty">No solver trajectories under trajectories/ yet.</p>')
    probes = [e for e in viewer.entries if e.kind == "probe"]
    if probes:
        parts.append(f"<h2 id='probes'>The proposer's solver probes ({len(probes)})</h2>")
        rows = [[link(rel(e.page, out), e.source.relative_to(RunPaths(viewer.root).trajectories).as_posix()),
                 reward_badge(e.summary.get("reward")), _outcome_cell(e.summary), num(e.summary.get("turns"))]
                for e in probes]
        parts.append(table("probes-table", [("trajectory", ""), ("reward", "num"), ("outcome", ""), ("turns", "num")], rows))
    nav = " ".join([link(rel(report, out), "report"), link("#proposer", "proposer episodes"),
                    link("#solver", "solver attempts")])
    return document(f"trajectories of {viewer.root.name}", "".join(parts), nav, esc(str(viewer.root)))


@functools.lru_cache(maxsize=1)
def _code_mtime() -> float:
    here = Path(__file__).parent
    return max((here / name).stat().st_mtime for name in ("viewer.py", "page.py"))


def build(run_dir: str | Path, out: str | Path | None = None, reasons: dict[str, str] | None = None) -> Viewer:
    """Render the viewer of ``run_dir`` into ``out`` (default ``RUN_DIR/viewer``); returns it.
    ``reasons``: what became of each proposer episode, by assignment id (read from the run dir
    when not given), shown atop its page."""
    paths = RunPaths(Path(run_dir))
    out = Path(out) if out is not None else paths.root / "viewer"
    out.mkdir(parents=True, exist_ok=True)
    viewer = Viewer(paths.root, out, _collect(paths, out))
    cache_path = out / CACHE
    try:
        cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    except ValueError:
        cache = {}
    fresh = {}
    code = _code_mtime()
    if reasons is None and any(e.kind != "solver" for e in viewer.entries):
        from aes.report.rundata import RunData

        reasons = {ep.assignment_id: ep.reason for ep in RunData(paths.root).episodes}
    for entry in viewer.entries:
        key = str(entry.source.resolve())
        stat = entry.source.stat()
        stamp = [stat.st_mtime, stat.st_size]
        cached = cache.get(key)
        up_to_date = (cached and cached.get("stamp") == stamp and entry.page.is_file()
                      and entry.page.stat().st_mtime >= max(stat.st_mtime, code))
        if up_to_date:
            entry.summary = cached["summary"]
        else:
            data = _load(entry.source)
            entry.summary = summarize(data)
            entry.page.parent.mkdir(parents=True, exist_ok=True)
            reason = (reasons or {}).get(entry.source.stem, "") if entry.kind != "solver" else ""
            entry.page.write_text(_trajectory_page(data, entry, viewer, paths.report, reason))
            viewer.rendered += 1
        fresh[key] = {"stamp": stamp, "summary": entry.summary}
    index_rows = []
    if paths.index.is_file():
        for line in paths.index.read_text().splitlines():
            try:
                index_rows.append(json.loads(line))
            except ValueError:
                continue
    env_facts = _env_pages(viewer, paths.report, index_rows)
    viewer.index.write_text(_index_page(viewer, paths.report, env_facts))
    tmp = cache_path.with_name(f"{CACHE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(fresh))
    os.replace(tmp, cache_path)
    log.info("trajectory viewer: %s (%d trajectories, %d page(s) rendered now)", viewer.index, len(viewer.entries),
             viewer.rendered)
    return viewer


def serve(root: Path, index: Path, port: int, host: str = "127.0.0.1") -> None:
    """Serve ``root`` over HTTP (the viewer's pages and the run dir they link into) until interrupted."""
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http.server.ThreadingHTTPServer((host, port), handler) as server:
        url = f"http://{host}:{server.server_address[1]}/{rel(index, root)}"
        print(f"serving {root} at {url} (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
