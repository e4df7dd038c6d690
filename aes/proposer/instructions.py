"""The proposer's instructions that every domain shares, written into each workspace.

Beside a domain's own ``task_format.md`` and ``what_to_build.md`` (``aes/domains/<name>/instructions/``)
a workspace gets:

* ``reward_spread.md`` — how to design a task the solver learns from (paper App. E.2, in our words);
* ``admission.md`` — what happens to a task that is handed in: every check in order with the run's
  own numbers (rendered from the config, so it never goes stale), the sealed verifier's rule, the
  solver's sandbox, base images, the review rubric, ``instructions/kit/``;
* ``workflow.md`` — how this harness works: the terminal agent's tools, memory and revisions, or
  the prompt arms' one reply (which cannot run or remember anything).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).parent / "docs"


def workspace_docs(cfg, calibrate_in_episode: bool = True) -> dict[str, str]:
    """File name -> text of the shared instructions for a run of ``cfg`` (an :class:`AesConfig`)."""
    return {"reward_spread.md": (DOCS / "reward_spread.md").read_text(),
            "admission.md": render_admission(cfg, calibrate_in_episode),
            "workflow.md": render_workflow(cfg, calibrate_in_episode)}


def _cpus(n: float) -> str:
    return f"{n:g} CPU" + ("" if n == 1 else "s")


def _gib(mb: float) -> str:
    return f"{mb / 1024:g} GiB"


def render_admission(cfg, calibrate_in_episode: bool = True) -> str:
    adm, cal, dom, box = cfg.admission, cfg.calibration, cfg.domain, cfg.sandbox
    nop = ("exactly 0 (this domain demands it: a test that passes on the untouched environment must be "
           "gated on the work)" if dom.nop_zero else f"below {adm.nop_max_reward:g}")
    steps = [
        "**static**: the layout, task.toml's schema, nothing of `solution/` or `tests/` copied into the image, "
        "no privileged or host options, no Dockerfile heredocs"
        + ("; `blockers.json` is present and well-formed" if dom.blocker_registry else ""),
        f"**build**: the image builds within `[environment] build_timeout_sec` (at most {box.max_build_timeout_sec:g} s)",
        "**reference**: `solution/solve.sh` runs in a fresh container, then the tests: the reward must be exactly 1.0",
        f"**do nothing**: the tests on the untouched environment: the reward must be {nop}",
    ]
    if dom.blocker_registry:
        steps.append("**blockers**: each withheld detail changes the result (see task_format.md)")
    if dom.reset_check:
        steps.append("**reset**: a second fresh environment starts in the same state (its files hashed) and the "
                     "reference scores 1.0 again")
    if importlib.util.find_spec(f"aes.domains.{dom.name}.checks") is not None:
        steps.append("**domain checks**: this domain's own checks (task_format.md names them)")
    decontam_on = bool(dom.decontam_index or dom.benchmark_instructions)
    steps.append(f"**decontamination**: the instruction shares no {adm.ngram}-word sequence with a held-out "
                 "benchmark task" + ("" if decontam_on else " (no benchmark index is configured in this run: off)"))
    steps.append("**review**: a model grades the task against the rubric below; every criterion must pass"
                 if adm.review else "**review**: off in this run")
    band = f"[{cal.band_low:g}, {cal.band_high:g}]"
    steps.append(
        f"**calibration**: the current solver attempts the task {cal.initial_attempts} times "
        f"({cal.expanded_attempts} when the mean reward is within {cal.expand_margin:g} of a band edge); the "
        f"task is admitted when the mean reward is in {band} and the rewards' standard deviation is at least "
        f"{cal.min_std:g}. Below the band, {cal.diagnostic_rollouts} diagnostic attempt that is shown the "
        "reference solution is run and its trajectory comes back to you"
        + ("" if calibrate_in_episode else
           ". In this run (mode=generate) calibration is measured once on the task you finally hand in and "
           "no revision answers it"))
    lines = ["# Admission: what happens to the task you hand in", "",
             "Every check runs outside your reach, in this order; the first one that fails sends the task "
             "back with its reasons (`stage.code: message`). Only a task that passes them all joins the "
             "training pool.", ""]
    lines += [f"{i}. {step}" for i, step in enumerate(steps, 1)]
    revisions = cfg.harness.max_revisions
    lines += ["", f"Revisions: after the first submission you may hand in {revisions} revised "
              f"version{'' if revisions == 1 else 's'} of the task" + (" (none in this harness)" if not revisions else "")
              + "; every revision goes through every check again.", ""]
    lines += _sealed(box.trusted_verifier)
    lines += ["## The solver's sandbox", "",
              f"An attempt runs in a container of your image with {_cpus(box.default_cpus)} and "
              f"{_gib(box.default_memory_mb)} of memory unless task.toml's `[environment]` sets `cpus` / "
              "`memory_mb`: a value there replaces these (it is not a minimum). Leave them out unless the task "
              "needs more; never copy a smaller value from an older task. The attempt's time limit is "
              f"`[agent] timeout_sec` ({box.default_agent_timeout_sec:g} s when unset, at most "
              f"{box.max_agent_timeout_sec:g} s); the tests' is `[verifier] timeout_sec` "
              f"({box.default_verifier_timeout_sec:g} s when unset). With `network_mode = \"no-network\"` the "
              "attempt has no network: everything must be in the image.", ""]
    lines += _images(box)
    if adm.review:
        rubric = adm.rubric_for(dom.name)
        lines += ["## The review rubric", "", "The grader sees every file of the task (and the parent's instruction "
                  "and tests, for novelty); a rejection names the criterion.", ""]
        lines += [f"- `{c.name}`: {c.requirement}" for c in rubric]
        lines.append("")
    lines += ["## instructions/kit/", "",
              "Files that tasks of some domains carry byte for byte (task_format.md says which and where, e.g. "
              "`tests/untrusted.py`); admission compares the copy with the kit. Copy them, never retype or "
              "edit them.", ""]
    return "\n".join(lines)


def _sealed(trusted: bool) -> list[str]:
    if not trusted:
        return ["## Where the tests run", "",
                "In this run the tests run in the agent's own container after the attempt, as Harbor runs them: "
                "what the attempt left behind (files, installed software, running processes) is what they see.", ""]
    return ["## Where the tests run: the sealed verifier", "",
            "The tests never run in the agent's container. When an attempt ends (the reference's run too), "
            "its container is frozen and the tests run in a fresh container started from your image, into "
            "which aes copies the files the attempt changed — as data. The rule: the tests run with the "
            "image's own tools, so nothing an attempt does can change what runs at verification.", "",
            "- **Carried**: the work as files — outputs, code, configuration, databases, anywhere data lives "
            "(the workdir, `/srv`, `/etc/<app>`, `/tmp`, home directories' ordinary files).",
            "- **Not carried**: running processes (a server, a daemon, anything started in the background), and "
            "every change to the verifier's runtime: software installed after the build (apt, pip, npm; "
            "anything under `/usr`, on `PATH`, in site-packages or node_modules), interpreter and tool "
            "configuration (pip.conf, shell rc files, dot-directories in homes).",
            "",
            "So: install every tool and library the task needs (the tests' too) in the Dockerfile; make the "
            "work end as files; a test that needs a running service starts it itself from what the image "
            "has; a reference that installs or starts something passes only if the files it leaves are "
            "enough. The validate tool and admission name the changes that were not carried.", ""]


def _images(box) -> list[str]:
    local = sorted(name for name, image in box.image_aliases.items())
    lines = ["## Base images", "",
             "- The tests run `python3 -m pytest`: python3 and pytest must be in the image. A pulled "
             "`python:3.12-slim` has python3 but no pytest: add "
             "`RUN python3 -m pytest --version >/dev/null 2>&1 || pip install --no-cache-dir pytest==8.3.5`. "
             "A pulled `debian:bookworm` (or `ubuntu`) has no python3 at all: add "
             "`RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest && "
             "rm -rf /var/lib/apt/lists/*`; its pip refuses to install into that Python without "
             "`--break-system-packages` (the seeds pass it; `python:*` images accept it too).",
             "- Where no registry answers, these public images are replaced by the local image "
             f"`{box.base_image}` (Debian bookworm with python3, pip and pytest): {', '.join(f'`{n}`' for n in local)}. "
             "Write the Dockerfile so that it works on both (the lines above do).",
             "- No heredocs in the Dockerfile (`RUN cat <<EOF`): the builder cannot parse them. Put files in "
             "`environment/` and COPY them.",
             "- Pin every version you install; nothing is downloaded when the tests run.", ""]
    return lines


def render_workflow(cfg, calibrate_in_episode: bool = True) -> str:
    h = cfg.harness
    revisions = h.max_revisions
    if h.name in ("prompt", "prompt_feedback"):
        lines = [f"# How you work (the {h.name} harness)", "",
                 "You have no shell, no tools and no workspace to read: everything you get is in the "
                 "messages (these instructions, your assignment, the parent task's files and the solver's "
                 "attempts on it). You write the whole task in one reply, as file blocks.", "",
                 "Where task_format.md or what_to_build.md tell you to validate, run the solver, read files "
                 "in the workspace or keep notes in `memory/`, they describe an agent with a shell; you cannot "
                 "do those things. Check your files by reading them carefully before you reply.",
                 "A file the instructions say to copy from `instructions/kit/` byte for byte is not shown to you: "
                 "write `<kit name=\"NAME\" path=\"PATH IN THE TASK\"/>` and aes copies it in.", "",
                 "Your reply has a token limit: a file block it cuts off is lost (you are told which). Keep files "
                 "short; generate large inputs in the Dockerfile with a script instead of writing them out.", ""]
        if h.name == "prompt_feedback":
            lines += [f"After each reply aes builds your draft and runs its reference solution and a do-nothing "
                      f"run (checks 1-4 of admission.md), and sends you the verdict with the build and test logs; "
                      f"you then rewrite the whole task, up to {h.feedback_rounds} times, until it passes. Then it "
                      "is handed in to admission."]
        else:
            lines += ["Nothing you write is run before it is handed in: your one reply is the task."]
        lines += ["", f"Admission may send the task back {revisions} time{'' if revisions == 1 else 's'} with its "
                  "reasons; you then write the whole task again." if revisions else
                  "No revision follows admission's verdict in this harness."]
        return "\n".join(lines) + "\n"
    tools = ["- `bash`: one shell command in your container.",
             "- `validate [env_NNN]`: builds the draft and runs what admission runs before calibration, outside "
             "your container: the reference solution, a do-nothing run"
             + (", the reset check" if cfg.domain.reset_check else "") + ", decontamination"
             + (" and the review" if cfg.admission.review else "") + "; it returns each verdict with the logs."]
    if h.solver_feedback:
        tools.append(f"- `solver_model [env_NNN] [attempts]`: the current solver attempts the draft ({h.solver_probe_attempts} "
                     "attempts by default, at most 8) and you get its rewards and failure labels: where the task "
                     "lies against the calibration band.")
    tools.append("- `submit`: hands in your latest draft and ends your turn.")
    web = "has network access" if h.web_access else "has no network"
    turns = "no turn limit" if h.max_turns is None else f"at most {h.max_turns} turns"
    return "\n".join([
        "# How you work (the terminal harness)", "",
        f"You are an agent with a shell in your own container ({_cpus(h.cpus)}, {_gib(h.memory_mb)}; it {web} and "
        f"no Docker: building and running tasks happens outside it, through your tools). Your episode has "
        f"{turns} and a budget of {h.episode_timeout_sec / 60:g} minutes.", "",
        "Your workspace is `/workspace`: `instructions/` (read-only: these documents, your assignment, the "
        "kit), `past_environments/` (the parent and other admitted tasks) and `past_trajectories/` (the "
        "solver's attempts; read-only), and your drafts: write the task into a new directory `env_001/` "
        "(`env_002/` for the next draft).", "", "Your tools:", *tools, "",
        f"After `submit`, admission runs every check (admission.md). If it sends the task back you get the "
        f"reasons and may hand in a revised draft (a new `env_NNN/`), {revisions} time{'' if revisions == 1 else 's'}.",
        "",
        "`memory/`, `skills/` and `tools/` persist across rounds: read them first, keep what you learn there "
        "(what failed admission and why, checks that caught a bug), and put helper scripts you want to "
        "reuse in `tools/`.", ""])
