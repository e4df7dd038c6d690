"""Small HTML helpers shared by ``report.html`` and the trajectory viewer: one stylesheet, escaping,
number formatting, status badges and a table that sorts and filters itself (no external assets:
the pages open from disk, in a browser with no network, and from ``aes view --serve``)."""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from pathlib import Path
from typing import Any, Iterable

CSS = """
:root{--fg:#1d2330;--muted:#667085;--line:#e4e7ec;--bg:#f8f9fb;--ok:#137333;--bad:#b42318;--warn:#b54708;--acc:#2f5fb3}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:#fff}
header.top{padding:1.2em 2em .6em;border-bottom:1px solid var(--line);background:var(--bg)}
header.top h1{margin:0 0 .2em;font-size:1.5em}
nav a{margin-right:1.1em}
main{padding:0 2em 3em;max-width:1500px}
h2{margin:1.6em 0 .5em;font-size:1.2em;border-bottom:1px solid var(--line);padding-bottom:.2em}
h3{margin:1.2em 0 .4em;font-size:1.05em}
a{color:var(--acc);text-decoration:none} a:hover{text-decoration:underline}
p.lead{font-size:1.05em;max-width:70em}
ul.facts{margin:.3em 0;padding-left:1.2em;max-width:80em} ul.facts li{margin:.25em 0}
.muted{color:var(--muted)} .small{font-size:.88em}
.empty{color:var(--muted);font-style:italic;margin:.4em 0}
table.data{border-collapse:collapse;margin:.4em 0;font-size:.92em}
table.data th,table.data td{padding:4px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
table.data th{background:var(--bg);position:sticky;top:0;cursor:pointer;user-select:none;white-space:nowrap}
table.data td.num,table.data th.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{max-height:36em;overflow:auto;border:1px solid var(--line);display:inline-block;max-width:100%}
.badge{display:inline-block;padding:0 .5em;border-radius:.7em;font-size:.85em;background:#eef1f6;white-space:nowrap}
.badge.ok{background:#dcf5e3;color:var(--ok)} .badge.bad{background:#fde4e1;color:var(--bad)}
.badge.warn{background:#fff1d6;color:var(--warn)} .badge.info{background:#e4ecfb;color:var(--acc)}
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top}
figure img{border:1px solid var(--line);max-width:100%}
figcaption{font-weight:600;margin-bottom:.2em} figure .note{max-width:34em;font-size:.88em;color:var(--muted)}
pre{background:var(--bg);border:1px solid var(--line);padding:.6em .8em;overflow:auto;max-height:34em;
    white-space:pre-wrap;word-break:break-word;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;margin:.3em 0}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:.15em 1.2em;margin:.4em 0}
dl.kv dt{color:var(--muted)} dl.kv dd{margin:0}
input.filter{display:block;margin:.3em 0;padding:3px 6px;width:22em}
.step{border:1px solid var(--line);border-radius:6px;margin:.8em 0;overflow:hidden}
.step>.head{background:var(--bg);padding:.35em .8em;font-size:.9em;display:flex;gap:1em;flex-wrap:wrap}
.step>.body{padding:.3em .8em .6em}
.step.system>.head{background:#f1f0fa} .step.user>.head{background:#eef6ee} .step.agent>.head{background:#eef3fb}
.label{font-weight:600;text-transform:uppercase;font-size:.8em;letter-spacing:.04em}
.tool pre{background:#1d2330;color:#e6edf3;border-color:#1d2330}
.obs{margin-top:.3em}
"""

SORT_JS = """
document.querySelectorAll('table.data').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
    var b=t.tBodies[0],rows=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    function v(r){var c=r.cells[i];if(!c)return '';var s=c.dataset.v!==undefined?c.dataset.v:c.textContent.trim();
      var n=parseFloat(s);return (s!==''&&!isNaN(n)&&/^[-+.\\d]/.test(s))?n:s.toLowerCase();}
    rows.sort(function(x,y){var a=v(x),c=v(y);if(typeof a!==typeof c){a=String(a);c=String(c);}
      return (a<c?-1:a>c?1:0)*(asc?1:-1);});rows.forEach(function(r){b.appendChild(r);});});});});
document.querySelectorAll('input.filter').forEach(function(inp){inp.addEventListener('input',function(){
  var t=document.getElementById(inp.dataset.table),q=inp.value.toLowerCase();
  Array.from(t.tBodies[0].rows).forEach(function(r){r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':'';});});});
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def num(value: Any, digits: int = 3) -> str:
    """A number for a table cell: ints as ints, floats to ``digits`` significant places, None as -."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e9:
            return f"{int(value):,}" if abs(value) >= 1 else f"{value:.{digits}g}"
        return f"{value:.{digits}g}"
    return esc(value)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}" if value in (0.0, 1.0) else f"{value:.1%}"


def usd(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:.4f}"


def when(epoch: float | None) -> str:
    """An epoch time as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(float(epoch), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


BADGE = {"admitted": "ok", "calibrated": "ok", "ok": "ok", "valid": "warn", "proposed": "info",
         "invalid": "bad", "broken": "bad", "retired": "", "open": "info", "infrastructure": "warn",
         "outside the band": "warn", "interrupted": "info", "waiting for room": "ok"}


def badge(text: Any, kind: str | None = None) -> str:
    kind = BADGE.get(str(text), "") if kind is None else kind
    return f'<span class="badge {kind}">{esc(text)}</span>'


def reward_badge(reward: Any) -> str:
    if not isinstance(reward, (int, float)) or isinstance(reward, bool):
        return badge("no reward", "bad")
    kind = "ok" if reward >= 1.0 else "bad" if reward <= 0.0 else "warn"
    return badge(f"{reward:.2f}", kind)


def link(href: str | None, text: Any, title: str | None = None) -> str:
    if not href:
        return esc(text)
    extra = f' title="{esc(title)}"' if title else ""
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


def rel(target: Path, start_dir: Path) -> str:
    """A relative URL from a page in ``start_dir`` to ``target`` (forward slashes, escaped later)."""
    return Path(os.path.relpath(target, start_dir)).as_posix()


def table(table_id: str, columns: Iterable[tuple[str, str]], rows: list[list[str]], filter_box: bool = True,
          scroll: bool = True) -> str:
    """A sortable table; ``columns`` are (header, css class), ``rows`` hold ready HTML cells (a cell
    may be a ``(html, sort_value)`` tuple)."""
    cols = list(columns)
    head = "".join(f'<th class="{c}">{esc(h)}</th>' for h, c in cols)
    body = []
    for row in rows:
        cells = []
        for (_, cls), cell in zip(cols, row):
            if isinstance(cell, tuple):
                cells.append(f'<td class="{cls}" data-v="{esc(cell[1])}">{cell[0]}</td>')
            else:
                cells.append(f'<td class="{cls}">{cell}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    box = (f'<input class="filter" data-table="{table_id}" placeholder="filter {len(rows)} rows">'
           if filter_box and len(rows) > 8 else "")
    inner = f'<table class="data" id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return box + (f'<div class="scroll">{inner}</div>' if scroll else inner)


def kv(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, ready HTML) pairs, skipping empty values."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs if v not in (None, "", "-"))
    return f'<dl class="kv">{items}</dl>'


def jsonish(value: Any) -> str:
    """A small value shown as text: strings as themselves, the rest as compact JSON."""
    if isinstance(value, str):
        return esc(value)
    return esc(json.dumps(value, ensure_ascii=False))


def document(title: str, body: str, nav: str = "", subtitle: str = "") -> str:
    sub = f'<div class="muted">{subtitle}</div>' if subtitle else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f'<header class="top"><h1>{esc(title)}</h1>{sub}<nav>{nav}</nav></header>'
            f"<main>{body}</main><script>{SORT_JS}</script></body></html>")


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A markdown table of plain text cells (``|`` escaped)."""
    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def text_table(table_id: str, headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """:func:`table` of plain text cells (escaped here); columns from ``numeric_from`` on are right-aligned."""
    cols = [(h, "num" if i >= numeric_from else "") for i, h in enumerate(headers)]
    return table(table_id, cols, [[esc(c) for c in row] for row in rows], scroll=False)
