"""What the proposer is told, in every domain and harness: App. E.2's design guidance, the true
environment and admission facts (rendered from the run's config), the assignment's solver, and
prompt-arm replies read as far as they can be (no Docker: the workspaces are built for real from
each domain's seeds and instructions)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from aes.config import compose_config
from aes.domains import instructions_dir, seeds_dir
from aes.pool import PoolStore
from aes.proposer.assignments import SIMPLER, Assignment, SolverProfile
from aes.proposer.files import parse_reply, render_files, write_files
from aes.proposer.harness import context_message, system_prompt
from aes.proposer.instructions import workspace_docs
from aes.proposer.workspace import KIT, build_workspace
from aes.tasks import find_tasks, load_task
from tests.conftest import REPO

DOMAINS = sorted(p.stem for p in (REPO / "conf" / "domain").glob("*.yaml"))


def workspace(tmp_path: Path, overrides: list[str]):
    """A real workspace for an assignment on the domain's first seed, as the run builds it."""
    cfg = compose_config(overrides)
    pool = PoolStore(tmp_path / "pool")
    seed = find_tasks([seeds_dir(cfg.domain)])[0]
    env, _ = pool.add(seed, name=load_task(seed).name, status="admitted", source="seed")
    a = Assignment(env.env_id, env.name, "local", 0.0, "no output file /app/out.csv", SIMPLER, assignment_id="a000",
                   solver_profile=SolverProfile.from_config(cfg).__dict__)
    ws = build_workspace(tmp_path / "ws", a, pool, tmp_path / "trajectories", instructions_dir(cfg.domain),
                         tmp_path / "persistent", cfg.harness.solver_feedback, workspace_docs(cfg))
    return cfg, a, ws


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_domain_carries_the_spread_guidance_and_the_true_facts(domain, tmp_path):
    cfg, _, ws = workspace(tmp_path, [f"domain={domain}", "calibration.min_std=0.2", "calibration.band_low=0.3",
                                      "calibration.expanded_attempts=6", "harness.max_revisions=1"])
    docs = {p.name: p.read_text() for p in (ws.root / "instructions").glob("*.md")}
    assert {"task_format.md", "what_to_build.md", "reward_spread.md", "admission.md", "workflow.md",
            "ASSIGNMENT.md"} <= set(docs)
    spread = docs["reward_spread.md"]
    for rule in ("spread", "No additive checklist", "Gate shape checks on real content", "randomness",
                 "underspecification", "do not duplicate", "Do not leak the tests"):
        assert rule in spread, rule
    admission = docs["admission.md"]
    # the numbers come from this run's config, not from a text that goes stale
    for fact in ("standard deviation is at least 0.2", "in [0.3, 0.75]", "(6 when the mean reward", "1 revised version",
                 "the sealed verifier", "running processes", "no python3 at all", "no pytest",
                 f"{cfg.sandbox.default_cpus:g} CPU", "a value there replaces these", "instructions/kit/"):
        assert fact in admission, fact
    for criterion in cfg.admission.rubric_for(domain):
        assert f"`{criterion.name}`: {criterion.requirement}" in admission
    assert ("exactly 0" in admission) == cfg.domain.nop_zero
    # the templates keep the solver's sandbox: no task.toml block sets cpus or memory_mb
    blocks = re.findall(r"```toml\n(.*?)```", docs["task_format.md"], re.DOTALL)
    environments = [tomllib.loads(b)["environment"] for b in blocks if "[environment]" in b]
    assert all("cpus" not in e and "memory_mb" not in e for e in environments)
    # no domain text asks for what only a terminal agent can do; workflow.md says what each harness can
    for name in ("task_format.md", "what_to_build.md"):
        assert "validate your draft" not in docs[name] and "Record what you learn" not in docs[name]
    kit = {p.name for p in (ws.root / "instructions" / "kit").iterdir()}
    assert {p.name for p in KIT.glob("*.py")} <= kit
    assert (ws.root / "instructions/kit/untrusted.py").read_bytes() == (KIT / "untrusted.py").read_bytes()
    domain_kit = instructions_dir(cfg.domain).parent / "kit"
    assert {p.name for p in domain_kit.glob("*") if p.is_file()} <= kit
    assert "smollm2" in docs["ASSIGNMENT.md"] and "at most" in docs["ASSIGNMENT.md"]


def test_the_seeds_keep_the_solvers_sandbox():
    """The seeds are the parents a proposer copies: none sets cpus, and memory_mb only where the
    application needs more than the laptop's solver sandbox (so the paper's 4 CPU / 8 GiB apply there)."""
    laptop = compose_config([]).sandbox.default_memory_mb
    environments = {path: tomllib.loads((path / "task.toml").read_text()).get("environment", {})
                    for path in REPO.glob("aes/domains/*/seeds/*") if (path / "task.toml").is_file()}
    assert len(environments) >= 40
    assert [p.name for p, e in environments.items() if "cpus" in e] == []
    assert [p.name for p, e in environments.items() if e.get("memory_mb", laptop + 1) <= laptop] == []


def test_tool_calling_gives_its_test_sh_and_says_who_lists_the_tools():
    text = (instructions_dir(compose_config(["domain=tool_calling"]).domain) / "task_format.md").read_text()
    seed_test = next((REPO / "aes/domains/tool_calling/seeds").glob("*/tests/test.sh")).read_text()
    assert f"```bash\n{seed_test}```" in text  # the seeds' test.sh, given in full
    assert "aes appends to the instruction. So you do not list the tools in `instruction.md`" in " ".join(text.split())
    assert "instructions/kit/" in (instructions_dir(compose_config(["domain=tool_calling"]).domain) / "kit.md").read_text()


@pytest.mark.parametrize("harness", ["prompt", "prompt_feedback", "terminal"])
def test_each_harness_is_told_what_it_can_do(harness, tmp_path):
    _, a, ws = workspace(tmp_path, [f"harness={harness}", "domain=swe"])
    workflow = (ws.root / "instructions" / "workflow.md").read_text()
    if harness == "terminal":
        assert "`validate [env_NNN]`" in workflow and "decontamination and the review" in workflow
        assert "`solver_model" in workflow and "memory/" in workflow
        return
    system = system_prompt(ws)
    assert system.startswith(f"# How you work (the {harness} harness)")  # first, before the domain's texts
    assert "you cannot do those things" in system and "`validate [env_NNN]`" not in system
    assert '<kit name="NAME"' in system
    assert ("rewrite the whole task, up to" in system) == (harness == "prompt_feedback")
    message = context_message(a, ws, 24000)
    assert '<kit name="untrusted.py" path="tests/untrusted.py"/>' in message  # the parent's kit copy, by name
    assert message.index('<file path="instruction.md">') < message.index('<file path="tests/test_outputs.py">')


def test_the_no_feedback_arm_has_no_solver_tool_and_no_solver_results(tmp_path):
    _, a, ws = workspace(tmp_path, ["harness.solver_feedback=false"])
    assert "solver_model" not in (ws.root / "instructions" / "workflow.md").read_text()
    brief = (ws.root / "instructions" / "ASSIGNMENT.md").read_text()
    assert "no output file" not in brief and "mean reward" not in brief
    record = a.to_dict(solver_feedback=False)
    assert record["mean_reward"] is None and record["most_common_failure"] is None and record["direction"] == "withheld"


def test_harness_optimization_is_on_for_the_paper_lines_and_off_on_the_laptop():
    for line in (["proposer=claude", "solver=qwen"], ["proposer=gpt", "solver=qwen"], ["experiment=paper_frontier"],
                 ["experiment=paper_self_play"]):
        assert compose_config(line).harness.reflection, line
    assert not compose_config([]).harness.reflection  # the embedded proposer (conf/scale/proposer/local.yaml)


# -- prompt-arm replies --------------------------------------------------------------------------

def test_a_reply_keeps_its_task_files_and_says_what_it_left_out(tmp_path):
    text = ('Plan first.\n<file path="instruction.md">\nDo it.\n</file>\n<file path="README.md">\nnotes\n</file>\n'
            '<file path="../escape">x</file>\n<kit name="untrusted.py" path="tests/untrusted.py"/>\n'
            '<kit name="nope.py" path="tests/nope.py"/>\n<file path="tests/test.sh">\n#!/bin/bash\n</file>\n'
            '<file path="tests/test_outputs.py">\ndef test_a():\n    assert open("/app/out')
    reply = parse_reply(text, "length", {"untrusted.py"})
    assert reply.files == {"instruction.md": "Do it.\n", "tests/test.sh": "#!/bin/bash\n"}
    assert reply.kits == {"tests/untrusted.py": "untrusted.py"}
    notes = "\n".join(reply.notes)
    assert "'README.md' was ignored" in notes and "'../escape' was ignored" in notes and "'nope.py'" in notes
    assert "'tests/test_outputs.py' was not written: the reply was cut at the token limit (max_tokens)" in notes
    write_files(reply.files, tmp_path / "draft", reply.kits, KIT)
    assert (tmp_path / "draft/tests/untrusted.py").read_bytes() == (KIT / "untrusted.py").read_bytes()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "draft/README.md").exists()
    closed = parse_reply('<file path="instruction.md">\nx\n</file>\n', "length")
    assert closed.files and "after its last complete block" in closed.notes[0]
    assert parse_reply('<file path="instruction.md">\nx\n</file>\n').notes == []


@pytest.mark.parametrize("domain", ["browser", "hil", "tool_calling", "desktop"])
def test_the_parent_view_shows_instruction_and_tests_first_within_the_budget(domain):
    seed = find_tasks([seeds_dir(compose_config([f"domain={domain}"]).domain)])[0]
    shown = render_files(seed, 12000)
    files = re.findall(r'<file path="([^"]+)">', shown)
    assert files[:2] == ["instruction.md", "tests/test_outputs.py"], files
    size = sum(p.stat().st_size for p in seed.rglob("*") if p.is_file())
    assert size > 12000 and "not shown (over the 12000-character budget" in shown  # the budget did bind
    body = shown[:shown.rindex("[files of")]
    assert len(body) <= 12000
