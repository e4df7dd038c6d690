"""The proposer: reply parsing, decontamination, review, assignments, workspace, episodes.

Scripted replies drive the control flow of whole episodes (admission, revision, pool);
the embedded model runs the same code in tests/test_generate_local.py.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from aes.admission.decontam import Decontaminator
from aes.admission.review import Reviewer, parse_verdict
from aes.config import AgentConfig
from aes.proposer.assignments import HARDER, SIMPLER, make_assignments
from aes.proposer.files import DraftError, parse_files, render_files
from aes.rollout import RolloutRunner
from aes.sandbox import TrialRunner
from tests.conftest import FIXTURES, REPO
from tests.test_agent import Scripted, reply


def test_parse_files_and_reject_escapes():
    files = parse_files('intro\n<file path="instruction.md">\nDo it.\n</file>\n'
                        '<file path="environment/Dockerfile">FROM x\n</file>')
    assert files == {"instruction.md": "Do it.\n", "environment/Dockerfile": "FROM x\n"}
    for bad in ("../x", "/etc/passwd", "environment/../../x", "notes.txt"):
        with pytest.raises(DraftError):
            parse_files(f'<file path="{bad}">x</file>')


def test_decontamination_uses_13_word_windows():
    held_out = "please compute the total revenue per customer from the sales table and write it to a csv file now"
    decon = Decontaminator({"bench/revenue": held_out}, n=13)
    words = held_out.split()
    assert decon.check("Intro. " + " ".join(words[2:15]).upper() + " and more.").code == "decontam.overlap"
    assert decon.check(" ".join(words[:12]) + " zebra " + " ".join(words[13:])) is None
    assert "bench/revenue" in str(decon.check(held_out))


def test_review_verdict_parsing(cfg, tmp_path):
    assert parse_verdict("no json here") is None
    text = 'Sure. {"criteria": [{"name": "a", "pass": true}]} trailing'
    assert parse_verdict(text) == [{"name": "a", "pass": True}]
    rubric = cfg.admission.rubric_for("terminal")
    names = [c.name for c in rubric]
    verdict = {"criteria": [{"name": n, "pass": True, "reason": "ok"} for n in names[1:]]
               + [{"name": names[0], "pass": False, "reason": "tests check a file the instruction never names"}]}
    grader = Scripted([reply(json.dumps(verdict))])
    result = Reviewer(grader, cfg.admission).review(FIXTURES / "good")
    assert not result.passed
    assert [str(r) for r in result.reasons] == [f"review.{names[0]}: tests check a file the instruction never names "
                                                f"(the criterion: {rubric[0].requirement})"]
    garbage = Reviewer(Scripted([reply("lol"), reply("still no")]), cfg.admission).review(FIXTURES / "good")
    assert [r.code for r in garbage.reasons] == ["review.unparseable"]


def test_failure_label_names_the_first_step_the_attempts_did_not_reach():
    """Real verifier output of the embedded solver: with no output file every test errored (the first
    FAILED line names a later check); the label names the missing file, not that test."""
    from aes.rollout import failure_signature

    runs = REPO / "tests/fixtures/runs/embedded/trajectories"
    missing = json.loads((runs / "aes-contacts-cleanup-bd1ad212/local/u0000-g0-assign/0.json").read_text())["extra"]
    assert "FAILED test_outputs.py::test_summary" in missing["verifier_stdout"]  # what the old label named
    assert failure_signature(missing["reward"], "ok", "format_errors", missing["verifier_stdout"]) == \
        "no output file /app/data/contacts_clean.csv (agent: format_errors)"
    partial = json.loads((runs / "aes-starter-echo-c9a34d2c/local/u0000-s00000-train/0.json").read_text())["extra"]
    assert partial["reward"] > 0  # some tests passed: the first failed one is the step not reached
    assert failure_signature(partial["reward"], "ok", "max_turns", partial["verifier_stdout"]) == \
        "test_file_is_exactly_hello_and_newline failed (agent: max_turns)"
    errored = ("ERROR test_outputs.py::test_a - ModuleNotFoundError: No module named 'report'\n"
               "ERROR test_outputs.py::test_b - ModuleNotFoundError: No module named 'report'\n2 errors in 0.1s\n")
    assert failure_signature(0.0, "ok", None, errored) == "module report not importable"
    other = "FAILED test_outputs.py::test_a - assert 1 == 2\nFAILED test_outputs.py::test_b\n2 failed in 0.1s\n"
    assert failure_signature(0.0, "ok", "done", other) == "no test passed (first: test_a) (agent: done)"


def test_assignment_describes_the_solver_from_the_config():
    from aes.config import compose_config
    from aes.proposer.assignments import SolverProfile

    cfg = compose_config(["solver=local", "agent.max_turns=7", "solver.max_tokens=333",
                          "sandbox.default_agent_timeout_sec=450"])
    row = {"env_id": "a", "mean": 0.0, "rewards": [0.0, None], "most_common_failure": "no output file /app/x",
           "failures": {"no output file /app/x": 1}}
    [a] = make_assignments([("a", "t/a")], [row], "local", 0, SolverProfile.from_config(cfg))
    text = a.brief()
    for fact in ("model: smollm2-135m-instruct", "at most 7 turns", "at most 333 generated tokens",
                 f"{cfg.solver.context_length:,} tokens of context", "(450 s when the task gives none",
                 f"at most {cfg.agent.observation_chars:,} characters", "attempts: 0.00, no verdict",
                 "the first step the attempts did not reach): no output file /app/x"):
        assert fact in text, fact
    assert "model: smollm2" in a.brief(solver_feedback=False) and "no output file" not in a.brief(solver_feedback=False)
    from aes.proposer.assignments import Assignment

    assert Assignment(**a.to_dict()).brief() == text  # a resumed generation reads the same brief


def test_review_rubrics_are_per_domain_hil_aware_and_a_rejection_names_the_criterion(cfg):
    """The grader of a human-in-the-loop task sees its blocker registry, is told the instruction
    withholds those details on purpose, and grades the domain's criteria (Harbor's functional
    verification, determinism, novelty, difficulty included) with the parent in view."""
    hil_seeds = REPO / "aes/domains/hil/seeds"
    task, parent = hil_seeds / "late-fee-policy", hil_seeds / "churn-risk-report"
    rubric = {c.name: c for c in cfg.admission.rubric_for("hil")}
    shared = {c.name: c for c in cfg.admission.rubric}
    assert {"functional_verification", "deterministic", "novel", "difficulty", "checks_gated_on_content",
            "no_test_leak", "blockers_sound"} <= set(rubric)
    for name in ("instruction_covers_tests", "output_schema_explicit"):  # would fail every correct HiL task
        assert rubric[name].requirement != shared[name].requirement and "blockers.json" in rubric[name].requirement
    assert "blockers_sound" not in {c.name for c in cfg.admission.rubric_for("terminal")}
    verdict = {"criteria": [{"name": n, "pass": n != "novel", "reason": "same steps as the parent"} for n in rubric]}
    grader = Scripted([reply(json.dumps(verdict))])
    result = Reviewer(grader, cfg.admission, "hil").review(task, parent)
    system, prompt = grader.seen[0][0]["content"], grader.seen[0][1]["content"]
    assert "withholds on purpose" in system and "--- blockers.json ---" in prompt
    assert (task / "blockers.json").read_text()[:200] in prompt
    assert "--- parent instruction.md ---" in prompt and (parent / "instruction.md").read_text()[:100] in prompt
    assert rubric["instruction_covers_tests"].requirement in prompt
    assert [r.code for r in result.reasons] == ["review.novel"] and rubric["novel"].requirement in str(result.reasons[0])
    Reviewer(Scripted([reply("{}")] * 2), cfg.admission).review(FIXTURES / "good")
    terminal = Scripted([reply("no")] * 2)
    Reviewer(terminal, cfg.admission).review(FIXTURES / "good")
    assert "withholds" not in terminal.seen[0][0]["content"] and "No parent task is shown" in terminal.seen[0][1]["content"]


def test_assignments_follow_the_solver():
    rows = [{"env_id": "a", "task": "t/a", "solver": "s", "mean": 0.1, "most_common_failure": "x failed"},
            {"env_id": "b", "task": "t/b", "solver": "s", "mean": 0.9, "most_common_failure": None}]
    out = make_assignments([("a", "t/a"), ("b", "t/b"), ("c", "t/c")], rows, "s", round=1)
    assert [a.direction for a in out] == [SIMPLER, HARDER, SIMPLER]  # no rollouts on c: start simpler
    assert out[0].most_common_failure == "x failed" and out[2].mean_reward is None
    assert "SIMPLER" in out[0].brief() and "x failed" in out[0].brief()
    assert "mean reward" not in out[0].brief(solver_feedback=False)


@pytest.mark.docker
def test_parents_rotate_least_used_first(stack_factory, tmp_path):
    from aes.pool import AssignmentLog
    from aes.proposer.generate import pick_parents, seed_pool

    stack = stack_factory([], [])
    seed_pool(stack)
    envs = stack.pool.envs("admitted")
    first = pick_parents(stack, len(envs), round=0)
    assert sorted(e.env_id for e in first) == sorted(e.env_id for e in envs)
    for env in first[:-1]:
        AssignmentLog(stack.pool).open(0, env.env_id, {})
    assert pick_parents(stack, 1, round=1)[0].env_id == first[-1].env_id


# -- whole episodes (Docker) ---------------------------------------------------------------

def good_task_reply(tmp_path, variant: str = "", readme: bool = False) -> str:
    src = tmp_path / f"good{variant}"
    shutil.copytree(FIXTURES / "good", src)
    if not readme:
        (src / "README").unlink()
    if variant:
        (src / "instruction.md").write_text((src / "instruction.md").read_text() + f"\n{variant}\n")
    return "Here is the task.\n" + render_files(src, 100_000)


def passing_review(cfg) -> str:
    return json.dumps({"criteria": [{"name": c.name, "pass": True, "reason": "fine"}
                                    for c in cfg.admission.rubric_for(cfg.domain.name)]})


SOLVE = [reply("```bash\necho 42 > /app/answer.txt\n```"), reply("DONE")]
GIVE_UP = [reply("DONE")]


@pytest.fixture
def stack_factory(sandbox, cfg, tmp_path):
    from aes.compose import build_admission, build_proposer_stack
    from aes.paths import RunPaths
    from aes.pool import PoolStore

    def make(proposer_replies, solver_replies, harness="prompt"):
        run_cfg = cfg.__class__(**{**cfg.__dict__})
        revisions = 0 if harness == "prompt" else cfg.harness.max_revisions  # the prompt arm never revises
        run_cfg.harness = cfg.harness.__class__(**{**cfg.harness.__dict__, "name": harness, "max_revisions": revisions})
        solver = Scripted(solver_replies)
        rollouts = RolloutRunner(solver, AgentConfig(), TrialRunner(cfg.sandbox, sandbox), tmp_path / "run",
                                 concurrency=1, solver_name="scripted")
        proposer, paths = Scripted(proposer_replies), RunPaths(tmp_path / "run")
        validator, pipeline, _ = build_admission(run_cfg, rollouts.trials, rollouts, proposer)
        return build_proposer_stack(run_cfg, paths, proposer, rollouts, PoolStore(paths.pool), pipeline, validator)

    return make


@pytest.mark.docker
def test_prompt_episode_admits_a_good_task(stack_factory, cfg, tmp_path):
    from aes.proposer.generate import run_assignments, seed_pool, summarize
    from aes.proposer.assignments import Assignment

    # proposer: the task files (and a README beside them, outside the task layout), then the review
    # verdict; solver: 2 of 4 calibration attempts solve
    stack = stack_factory([reply(good_task_reply(tmp_path, readme=True)), reply(passing_review(cfg))],
                          SOLVE + GIVE_UP + SOLVE + GIVE_UP)
    seed_pool(stack)
    parent = stack.pool.envs("admitted")[0]
    [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.0, None, SIMPLER)])
    assert result.outcome == "admitted" and result.revisions == 0 and result.failed_stages == []
    env = stack.pool.get(result.env_id)
    assert env.status == "admitted" and env.parent_id == parent.env_id and env.mean_reward == 0.5
    stages = [v["stage"] for v in stack.pool.verdicts(env.env_id)]
    assert stages == ["checks_1_4", "decontam_review", "calibration"]
    trajectory = json.loads(open(result.trajectory_path).read())
    assert trajectory["extra"]["outcome"] == "admitted"
    assert "the block 'README' was ignored: not inside the task layout" in trajectory["extra"]["note"]
    assert not (stack.pool.get(result.env_id).path / "README").exists()
    review_prompt = stack.proposer.seen[1][1]["content"]
    assert f"--- parent instruction.md ---\n{(parent.path / 'instruction.md').read_text()[:60]}" in review_prompt
    summary = summarize([result])
    assert summary["valid_env_rate"] == 1.0 and summary["accepted"] == 1


@pytest.mark.docker
def test_prompt_feedback_is_told_what_its_reply_lost_and_gets_its_rounds(stack_factory, cfg, tmp_path):
    """A reply cut at max_tokens inside a file loses that file (and says so); a reply without files is a
    feedback round too; the third reply is built, runs clean and is handed in."""
    from dataclasses import replace

    from aes.proposer.assignments import Assignment
    from aes.proposer.generate import run_assignments, seed_pool

    good = good_task_reply(tmp_path)
    cut = replace(reply(good[:good.index('<file path="tests/test_outputs.py">') + 60]), finish_reason="length")
    stack = stack_factory([cut, reply("Sorry, here is my plan."), reply(good), reply(passing_review(cfg))],
                          GIVE_UP * 4, harness="prompt_feedback")
    stack.cfg.harness.max_revisions = 0
    seed_pool(stack)
    parent = stack.pool.envs("admitted")[0]
    [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.0, None, SIMPLER)])
    told = [seen[-1]["content"] for seen in stack.proposer.seen]
    assert told[1].startswith("About your last reply: 'tests/test_outputs.py' was not written: the reply was cut "
                              "at the token limit (max_tokens) inside it")
    assert "I built and ran your draft" in told[1] and "static." in told[1]  # the half draft was built and judged
    assert told[2].startswith("Your reply gave no task: the reply held no <file> blocks")
    assert result.checks_1_4 and result.revisions == 0 and result.failed_stages == ["calibration"]


@pytest.mark.docker
def test_rejected_draft_gets_feedback_and_a_revision(stack_factory, cfg, tmp_path):
    from aes.proposer.generate import run_assignments, seed_pool
    from aes.proposer.assignments import Assignment

    broken = good_task_reply(tmp_path, "v1").replace("echo 42", "echo 41")  # oracle now fails
    proposer = [reply(broken), reply(good_task_reply(tmp_path, "v2")), reply(passing_review(cfg))]
    stack = stack_factory(proposer, GIVE_UP * 4)  # the solver never solves: too hard, not admitted
    # the episode loop's revisions, driven through PromptHarness.revise (the prompt arm itself gets none)
    stack.cfg.harness.max_revisions = 2
    seed_pool(stack)
    parent = stack.pool.envs("admitted")[0]
    [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.0, None, SIMPLER)])
    assert result.revisions == 2
    assert result.failed_stages == ["oracle", "calibration", "no_draft"]  # the 3rd reply held no files
    feedback = stack.proposer.seen[1][-1]["content"]
    assert "oracle.reward_below_one" in feedback
    assert result.outcome == "valid"  # the revision passed checks 1-6 but calibration put it below the band
    assert stack.pool.get(result.env_id).status == "valid"
    assert sum(e.status == "invalid" for e in stack.pool.envs()) == 1


@pytest.mark.docker
def test_terminal_harness_workspace_tools_and_memory_across_rounds(stack_factory, cfg, tmp_path):
    from aes.proposer.assignments import Assignment
    from aes.proposer.generate import run_assignments, seed_pool

    fence = "```bash\n{}\n```".format
    stack = stack_factory([], GIVE_UP * 10, harness="terminal")
    stack.cfg.harness.max_revisions = 0
    seed_pool(stack)
    parent = next(e for e in stack.pool.envs("admitted") if e.name == "aes/greeting-file")
    stack.proposer.replies = [
        reply(fence(f"cp -r /workspace/past_environments/{parent.env_id}/. /workspace/env_001/ && "
                    "echo 'Mind the trailing newline.' >> /workspace/env_001/instruction.md")),
        reply(fence("validate env_001")),
        reply(passing_review(cfg)),  # the review inside validate (graded by the proposer's model)
        reply(fence("echo 'lesson: copy the parent, then change one step' >> /workspace/memory/notes.md; "
                    "touch /workspace/instructions/mine; ls /var/run/docker.sock")),
        reply(fence("submit")),
        reply(passing_review(cfg)),
    ]
    [first] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.9, None, HARDER)])
    steps = json.loads(open(first.trajectory_path).read())["steps"]
    observations = [s["observation"]["results"][0]["content"] for s in steps if s.get("observation")]
    assert observations[1].startswith("valid: yes\nchecks 1-4: passed; oracle reward 1.0")
    assert "decontamination: passed" in observations[1] and "review: passed" in observations[1]
    # 4 agent turns, the review inside validate and admission's review, 15 tokens each: the tool's review counts
    assert first.tokens == 15 * 6
    assert "Read-only file system" in observations[2] and "No such file" in observations[2]
    assert first.outcome == "valid" and first.failed_stages == ["calibration"]  # the solver never solves it
    assert "lesson: copy the parent" in (tmp_path / "run/proposer/memory/notes.md").read_text()

    stack.proposer.replies = [reply(fence("cat /workspace/memory/notes.md")), reply(fence("submit"))]
    [second] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.9, None, HARDER)])
    steps = json.loads(open(second.trajectory_path).read())["steps"]
    seen = [s["observation"]["results"][0]["content"] for s in steps if s.get("observation")]
    assert "lesson: copy the parent" in seen[0]
    assert second.failed_stages == ["no_draft"]
    leftovers = stack.rollouts.trials.sandbox.client.containers.list(filters={"label": ["aes.role=proposer", f"aes.pid={os.getpid()}"]})
    assert leftovers == []


@pytest.mark.docker
@pytest.mark.security
@pytest.mark.engine_restart  # runs alone under two workers (tests/conftest.py)
def test_terminal_episode_goes_on_after_a_restart_of_the_docker_engine(stack_factory, cfg, tmp_path):
    import os
    import threading

    from aes.proposer.assignments import Assignment
    from aes.proposer.generate import run_assignments, seed_pool
    from aes.proposer.terminal_harness import RESTARTED
    from aes.sandbox.faults import restart_local_engine

    if os.environ.get("AES_ALLOW_ENGINE_RESTART") != "1":
        pytest.skip("restarts the Docker engine; set AES_ALLOW_ENGINE_RESTART=1 (CI does)")
    fence = "```bash\n{}\n```".format
    stack = stack_factory([], [], harness="terminal")
    stack.cfg.harness.max_revisions = 0
    seed_pool(stack)
    parent = stack.pool.envs("admitted")[0]
    cat = reply(fence("cat /workspace/memory/restart.txt"))
    # The command after the restart may still meet the old container (one turn lost), then the
    # episode moves to a new one.
    stack.proposer.replies = [reply(fence("echo kept > /workspace/memory/restart.txt; sleep 20")), cat, cat,
                              reply(fence("submit"))]
    timer = threading.Timer(4, restart_local_engine)
    timer.start()
    [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.9, None, HARDER)])
    timer.join()
    steps = json.loads(open(result.trajectory_path).read())["steps"]
    notice = next(i for i, s in enumerate(steps) if s["source"] == "user" and s["message"] == RESTARTED)
    after = [s["observation"]["results"][0]["content"] for s in steps[notice:] if s.get("observation")]
    assert "kept" in after[0]  # the next command ran in the new container on the same workspace
    assert result.failed_stages == ["no_draft"]
    assert stack.rollouts.trials.sandbox.client.containers.list(all=True, filters={"label": ["aes.role=proposer", f"aes.pid={os.getpid()}"]}) == []


def test_solver_probes_land_in_the_one_index_and_never_answer_for_an_older_policy(tmp_path):
    """``solver_model`` on a draft runs the run's solver as a batch of the one trajectory index
    (env ``probe-<hash>``, batch ``<current batch>-probe``, the policy version that ran it): the
    same draft probed after an update is attempted again by the new policy, not answered from the
    older policy's attempts. Simulated sandbox: the solver's skill decides its rewards."""
    from aes.config import compose_config
    from aes.models.scripted import ScriptedModel
    from aes.paths import RunPaths
    from aes.proposer.tools import ProposerTools
    from aes.rollout.index import read_index
    from aes.sandbox.simulated import SimulatedTrials
    from tests.conftest import make_task

    cfg = compose_config(["experiment=simulated"])
    solver = ScriptedModel(cfg.solver)
    paths = RunPaths(tmp_path / "run")
    rollouts = RolloutRunner(solver, cfg.agent, SimulatedTrials(cfg.sandbox), paths.root, 2, solver_name="scripted",
                             batch="u0000-g0", policy_version=0)
    tools = ProposerTools(None, rollouts, probe_attempts=4)
    draft = make_task(tmp_path, "draft", toml='[task]\nname = "sim/draft"\n\n[metadata]\nsim_difficulty = 2.0\n')

    first = tools.solver_probe(draft)
    solver.skill, rollouts.batch, rollouts.policy_version = 8.0, "u0003-g1", 3  # an update later (Flywheel._version)
    second = tools.solver_probe(draft)
    assert "[1.0, 1.0, 1.0, 1.0]" in second and first != second  # the new policy's own attempts
    assert tools.solver_probe(draft) == second  # the same policy again: its attempts are reused
    rows = [r for r in read_index(paths.index) if r["env_id"].startswith("probe-")]
    assert [(r["batch"], r["policy_version"], r["attempts"]) for r in rows] == [("u0000-g0-probe", 0, 4),
                                                                                ("u0003-g1-probe", 3, 4)]
    assert all(p.startswith(f"{rows[0]['env_id']}/scripted/{r['batch']}/") for r in rows for p in r["paths"])
    assert not (paths.root / "probes").exists()


def _rejected_episode(stack_factory, cfg, tmp_path, harness: str):
    """One real prompt-harness episode whose draft fails the oracle (Docker): its result carries the
    verdict reasons and the feedback admission sent. The reflection then runs as ``harness``."""
    from aes.proposer.assignments import Assignment
    from aes.proposer.generate import run_assignments, seed_pool

    broken = good_task_reply(tmp_path, "v1").replace("echo 42", "echo 41")  # the oracle now fails
    stack = stack_factory([reply(broken)], [])
    stack.cfg.harness.max_revisions = 0
    seed_pool(stack)
    parent = stack.pool.envs("admitted")[0]
    [result] = run_assignments(stack, [Assignment(parent.env_id, parent.name, "scripted", 0.0, None, SIMPLER)])
    assert result.outcome == "broken" and result.failed_stages == ["oracle"]
    assert any(r.startswith("oracle.reward_below_one") for r in result.reasons)
    assert result.feedback and "rejected at the oracle stage" in result.feedback[0]
    stack.cfg.harness.name = harness  # the same run's proposer reflects (the harness decides how)
    return stack, result


@pytest.mark.docker
def test_prompt_reflection_is_shown_the_verdict_reasons_feedback_and_log(stack_factory, cfg, tmp_path):
    from aes.proposer.reflection import reflect

    stack, result = _rejected_episode(stack_factory, cfg, tmp_path, "prompt")
    stack.proposer.replies = [reply("- the oracle failed: run solve.sh against the tests before submitting")]
    metrics = reflect(stack, 0, [result])
    prompt = stack.proposer.seen[-1][-1]["content"]
    aid = result.assignment.assignment_id
    assert "outcome: broken (r_P = 0.0)" in prompt and "failed stages: oracle" in prompt
    assert "oracle.reward_below_one" in prompt and "rejected at the oracle stage" in prompt
    log = stack.paths.history / "round_001" / f"{aid}.json"
    assert f"episode log: {log}" in prompt and json.loads(log.read_text())["extra"]["outcome"] == "broken"
    notes = (stack.paths.proposer / "memory" / "notes.md").read_text()
    assert "run solve.sh against the tests" in notes and metrics["reflection/files_changed"] == 1
    assert "memory/notes.md" in (stack.paths.reflection / "round_000.diff").read_text()


@pytest.mark.docker
def test_terminal_reflection_reads_its_history_and_logs_and_edits_memory_skills_and_tools(stack_factory, cfg,
                                                                                          tmp_path):
    from aes.proposer.reflection import reflect

    stack, result = _rejected_episode(stack_factory, cfg, tmp_path, "terminal")
    aid = result.assignment.assignment_id
    fence = "```bash\n{}\n```".format
    stack.proposer.replies = [
        reply(fence("cat /workspace/history/round_001.md")),
        reply(fence(f"grep -o '\"outcome\": \"[a-z]*\"' /workspace/history/round_001/{aid}.json")),
        reply(fence("echo '- oracle failed: test solve.sh first' >> /workspace/memory/notes.md && "
                    "printf '# check\\nRun validate before submit.\\n' > /workspace/skills/check.md && "
                    "printf '#!/bin/sh\\nbash solution/solve.sh\\n' > /workspace/tools/try.sh")),
        reply(fence("echo forged > /workspace/history/round_001.md")),
        reply("DONE"),
    ]
    reflect(stack, 0, [result])
    steps = json.loads((stack.paths.reflection / "round_000.json").read_text())["steps"]
    seen = [s["observation"]["results"][0]["content"] for s in steps if s.get("observation")]
    assert "oracle.reward_below_one" in seen[0] and "rejected at the oracle stage" in seen[0]
    assert f"episode log: /workspace/history/round_001/{aid}.json" in seen[0]
    assert '"outcome": "broken"' in seen[1]  # the log it was pointed to is readable in its sandbox
    assert "Read-only file system" in seen[3]  # its history is not its to rewrite
    assert "oracle failed" in (stack.paths.proposer / "memory" / "notes.md").read_text()
    diff = (stack.paths.reflection / "round_000.diff").read_text()
    assert all(f"b/{f}" in diff for f in ("memory/notes.md", "skills/check.md", "tools/try.sh"))
    assert stack.rollouts.trials.sandbox.client.containers.list(filters={"label": ["aes.role=proposer", f"aes.pid={os.getpid()}"]}) == []
