"""``aes``: operator commands (validate tasks, set up the sandbox)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.logging import RichHandler

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
sandbox_app = typer.Typer(no_args_is_help=True, help="Set up and clean the Docker sandbox.")
app.add_typer(sandbox_app, name="sandbox")
decontam_app = typer.Typer(no_args_is_help=True,
                           help="Decontamination (admission check 5): hash benchmark instructions, check tasks.")
app.add_typer(decontam_app, name="decontam")

SET_HELP = "Config override in Hydra syntax, e.g. --set sandbox.concurrency=2 (repeatable)."


def _setup_logging(verbose: bool = False) -> None:
    # on stderr: what a command prints on stdout (the JSON of `decontam check`, tables) stays parseable
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s",
                        handlers=[RichHandler(console=Console(stderr=True), show_path=False, show_time=False)],
                        force=True)


def _usage_error(message: str) -> None:
    """End a command that was asked for something impossible: the message, exit status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _config(overrides: list[str]):
    from aes.config import ConfigError, compose_config

    try:
        return compose_config(overrides)
    except ConfigError as exc:
        _usage_error(str(exc))


@app.command()
def doctor(
    overrides: list[str] = typer.Argument(None, help="The run's command-line overrides, e.g. proposer=claude solver=qwen."),
    no_vllm: bool = typer.Option(False, "--no-vllm", help="Skip vLLM's own check of the model config."),
) -> None:
    """Preflight a command line: the vLLM server command it would run, its tool parser and context
    decision (aes/cluster/preflight.py). Exit 0 when the run could start, 1 when it would stop."""
    from aes.cluster.preflight import preflight

    result = preflight(_config(list(overrides or [])), ask_vllm=not no_vllm)
    for line in result.lines:
        typer.echo(line)
    raise typer.Exit(0 if result.ok else 1)


@app.command()
def validate(
    paths: list[Path] = typer.Argument(..., exists=True, help="Task dirs, or dirs of task dirs."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the verdicts here as JSON."),
    concurrency: Optional[int] = typer.Option(None, help="Tasks validated at once (default sandbox.concurrency)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    quiet: bool = typer.Option(False, help="No progress bar."),
    logs: Optional[Path] = typer.Option(None, "--logs", help="Keep each reference run's /logs/agent and "
                                        "/logs/artifacts (e.g. screenshots) under LOGS/<task>/oracle."),
) -> None:
    """Run admission checks 1-4 (static, build, oracle = 1.0, no-op < admission.nop_max_reward, or 0 where the
    domain says so) and the domain's checks. Exit 0 only if all pass."""
    _setup_logging()
    from aes.admission import validate_all
    from aes.compose import make_validator
    from aes.report.validation import print_reports, write_json
    from aes.tasks import find_tasks

    cfg = _config(set_)
    tasks = find_tasks(paths)
    validator = make_validator(cfg, logs_dir=logs)
    reports = validate_all(validator, tasks, concurrency or cfg.sandbox.concurrency, show_progress=not quiet)
    print_reports(reports, title=validator.describe())
    if logs:
        typer.echo(f"the reference runs' logs (where they left any): {logs}/<task>/oracle")
    if json_out:
        write_json(reports, json_out)
    raise typer.Exit(0 if reports and all(r.valid for r in reports) else 1)


@decontam_app.command("build")
def decontam_build(
    paths: list[Path] = typer.Argument(..., exists=True, help=(
        "Benchmark task dirs, dirs of them (every instruction.md below, at any depth), instruction "
        "files, or index files to merge.")),
    out: Path = typer.Option(..., "--out", "-o", help="The index file to write."),
    n: int = typer.Option(13, "--n", help="Window size in words (admission.ngram)."),
) -> None:
    """Write a hash index of the instructions' n-word windows (a # line, then sorted unique hashes)."""
    from aes.admission.decontam import Decontaminator, write_index
    from aes.config import ConfigError

    try:
        decon = Decontaminator.from_paths(paths, n)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        _usage_error(str(exc))
    what = f"{decon.instructions} instruction(s)" + (f" and {decon.index_files} index file(s)" if decon.index_files else "")
    write_index(out, decon.index, f"aes decontam index: {n}-gram blake2b-64 hashes ({len(decon)}) of {what} "
                f"from {' '.join(str(p) for p in paths)}")
    typer.echo(f"{out}: {len(decon)} hashes of {n}-word windows from {what}")


@decontam_app.command("check")
def decontam_check(
    paths: list[Path] = typer.Argument(..., exists=True, help="Task dirs, dirs of them, or instruction files."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the rows here as JSON."),
    index: list[Path] = typer.Option([], "--index", exists=True, help=(
        "Index file or benchmark task dir to check against instead of the domain's "
        "(domain.decontam_index + domain.benchmark_instructions); repeatable.")),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Check instructions against the held-out index; exit 1 if any task is contaminated."""
    import json

    from aes.admission.decontam import Decontaminator, instruction_files
    from aes.config import ConfigError

    cfg = _config(set_)
    try:
        if index:
            decon = Decontaminator.from_paths(index, cfg.admission.ngram)
        else:
            decon = Decontaminator.from_domain(cfg.domain, cfg.admission.ngram)
        files = instruction_files(paths)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        _usage_error(str(exc))
    if decon.empty:
        _usage_error("the decontamination index is empty: pass --index FILE or set domain.decontam_index")
    if not files:
        _usage_error(f"no instruction.md under {' '.join(str(p) for p in paths)}")
    rows = []
    for name, file in files:
        found = decon.scan(file.read_text(encoding="utf-8", errors="replace"))
        row = {"task": name, "contaminated": found.matches > 0, "matches": found.matches}
        rows.append(row)
        typer.echo(json.dumps(row))
        if found.matches:
            typer.echo(f"  overlapping words: \"{found.quote()}\"", err=True)
    bad = sum(r["contaminated"] for r in rows)
    typer.echo(f"{bad}/{len(rows)} contaminated ({len(decon)} hashes of {decon.n}-word windows from "
               f"{', '.join(decon.sources[:3])}{' ...' if len(decon.sources) > 3 else ''})", err=True)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(rows, indent=2) + "\n")
    raise typer.Exit(1 if bad else 0)


@sandbox_app.command()
def bootstrap(
    force: bool = typer.Option(False, help="Rebuild the base image even if it exists."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Build the local base image (debootstrap + docker import) and aes's isolated network."""
    _setup_logging()
    from aes.sandbox import DockerSandbox
    from aes.sandbox.bootstrap import bootstrap_base_image
    from aes.sandbox.network import host_isolated

    cfg = _config(set_)
    image_id = bootstrap_base_image(cfg.sandbox, force=force)
    typer.echo(f"{cfg.sandbox.base_image} {image_id[:19]}")
    sandbox = DockerSandbox(cfg.sandbox)
    typer.echo(f"network {sandbox.network}: host services "
               f"{'unreachable from builds and trials' if host_isolated(cfg.sandbox) else 'REACHABLE (see the warning)'}")


@sandbox_app.command()
def selftest(set_: list[str] = typer.Option([], "--set", help=SET_HELP)) -> None:
    """Run hostile solutions against the verifier; exit 1 if any of them earns a reward."""
    _setup_logging()
    from aes.sandbox import TrialRunner
    from aes.sandbox.selftest import run_attacks

    results = run_attacks(TrialRunner(_config(set_).sandbox))
    for r in results:
        typer.echo(f"{'held  ' if r.held else 'BROKEN'}  {r.attack:<28} reward={r.reward} outcome={r.outcome}")
    held = sum(r.held for r in results)
    typer.echo(f"{held}/{len(results)} attacks held")
    raise typer.Exit(0 if held == len(results) else 1)


@sandbox_app.command()
def reap(set_: list[str] = typer.Option([], "--set", help=SET_HELP)) -> None:
    """Remove containers left behind by crashed aes processes on this host."""
    _setup_logging()
    from aes.sandbox import reap_orphans

    typer.echo(f"removed {reap_orphans(_config(set_).sandbox)} container(s)")


@app.command()
def report(sweep: Path = typer.Argument(..., help="A multirun dir (or one run dir) of generate or run jobs.")) -> None:
    """Assemble a sweep into the sweep dir: from mode=generate jobs Table 2 (markdown, CSV and an HTML
    figure) and Table 8 (per domain and proposer: acceptance rate, mean rounds of accepted tasks); from
    mode=run jobs Table 3 and Fig. 20 (per arm: the benchmark at matched update counts and the valid-env
    rate per generation, with the spread over seeds). Exits 1 when there is nothing to assemble."""
    from aes.report.sweep import assemble

    if not sweep.is_dir():
        _usage_error(f"no such directory: {sweep}")
    result = assemble(sweep)
    for text in result.texts:
        typer.echo(text)
    typer.echo(f"found: {result.found}", err=not result.written)
    if not result.written:
        raise typer.Exit(1)
    typer.echo("written: " + ", ".join(str(p) for p in result.written.values()))


RUN_MARKS = ("config.yaml", "metrics.jsonl", "trajectories/", "proposer/", "pool/")
"""What a run dir holds (any one of them)."""


def is_run_dir(path: Path) -> bool:
    return any((path / mark.rstrip("/")).exists() for mark in RUN_MARKS)


@app.command()
def view(
    run_dir: Path = typer.Argument(..., help="A run dir (holding trajectories/ and/or proposer/)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write the pages (default RUN_DIR/viewer)."),
    serve: Optional[int] = typer.Option(None, "--serve", help="Then serve them over HTTP on this port (0: any free one)."),
    host: str = typer.Option("127.0.0.1", help="Address to serve on (with --serve)."),
    report: bool = typer.Option(False, "--report", help="Also write report.html of the run dir again."),
) -> None:
    """Render the run's ATIF trajectories as static HTML: an index, then every solver attempt and proposer
    episode step by step (messages, commands, outputs, exit codes, rewards, verifier output)."""
    from aes.report.viewer import build
    from aes.report.viewer import serve as serve_dir

    if not run_dir.is_dir():
        _usage_error(f"no such directory: {run_dir}")
    if not is_run_dir(run_dir):
        _usage_error(f"{run_dir} is not a run dir: it holds none of {', '.join(RUN_MARKS)}; pass the dir a run "
                     "printed when it started (outputs/DATE/TIME by default)")
    if report:
        from aes.report.html import write_report

        typer.echo(f"report: {write_report(run_dir, title=f'aes run {run_dir.resolve().name}')}")
    viewer = build(run_dir, out)
    typer.echo(f"{viewer.index} ({len(viewer.entries)} trajectories, {viewer.rendered} page(s) rendered now)")
    if serve is not None:
        pages, run = viewer.out.resolve(), run_dir.resolve()
        root = run if pages.is_relative_to(run) else pages
        if root != run:
            typer.echo(f"serving only {pages}: the links into the run dir (raw JSON, report.html) resolve when the "
                       "pages are inside it (the default --out)", err=True)
        serve_dir(root, viewer.index.resolve(), serve, host)


if __name__ == "__main__":
    app()
