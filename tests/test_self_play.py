"""Shared-policy (self-play) training with the tiny model through the product's own path (paper
§3.3, App. G.1): proposer episodes run by the prompt harness on the shared chat model,
``TrainableSolver.proposer_groups`` (one group per assignment, r_P of the submitted env, flat
groups and other generations left out), solver groups from the same model's attempts, and one
DPPO update on DeepSpeed (``aes.train.step.train_step``, the flywheel's step) over both roles.
Only the outcome of each proposer episode is set here (admission is tested elsewhere); every
token trained was sampled by the policy being trained. No Docker."""

from __future__ import annotations

import json
import os

import pytest
import torch

from aes.agents import TrajectoryRecorder, write_json_atomic
from aes.config import compose_config
from aes.models import RunBudget
from aes.paths import RunPaths
from aes.pool import PoolStore
from aes.proposer.assignments import SIMPLER, Assignment
from aes.proposer.harness import PromptHarness
from aes.proposer.workspace import build_workspace
from aes.report.metrics import MetricsLogger
from aes.rollout import AttemptRecord, EnvRollouts
from aes.tasks import load_task
from aes.train.episodes import PROPOSER, SOLVER
from aes.train.backends import build_trainable_solver
from aes.train.step import train_step
from tests.conftest import SEEDS

os.environ.setdefault("DS_ACCELERATOR", "cpu")

OUTCOMES = {  # (round, group) -> the admission outcome of each sample's submitted env
    (0, "r0-0"): ["admitted", "broken", "valid"],  # r_P 1, 0, 0.5: a group with spread
    (0, "r0-1"): ["broken", "broken", "broken"],  # flat: dropped (DAPO)
    (1, "r1-0"): ["admitted", "broken", "broken"],  # another generation: not this update's
}
SOLVER_REWARDS = [1.0, 0.0, 0.5, 0.25]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def proposer_episodes(cfg, paths: RunPaths, chat, tmp_path) -> None:
    """Prompt-harness episodes of the shared model, recorded as ``run_episode`` records them."""
    pool = PoolStore(paths.pool)
    parent, _ = pool.add(SEEDS / "greeting-file", name="aes/greeting-file", status="admitted", source="seed")
    instructions = tmp_path / "instructions"
    instructions.mkdir()
    (instructions / "task_format.md").write_text("Write a Harbor task: instruction.md, task.toml, tests.\n")
    for (round_, group), outcomes in OUTCOMES.items():
        for i, outcome in enumerate(outcomes):
            a = Assignment(parent.env_id, parent.name, "tiny", 0.2, "tests failed", SIMPLER, round=round_,
                           assignment_id=f"{group}-{i}", group=group)
            workspace = build_workspace(paths.workspaces / a.assignment_id, a, pool, paths.trajectories,
                                        instructions, paths.proposer)
            harness = PromptHarness(chat, cfg.harness, tools=None)
            harness.start(a, workspace)  # the tiny model writes no files: its tokens are what is trained
            trajectory = harness.trajectory(assignment=a.to_dict(), outcome=outcome, env_id=None, revisions=0,
                                            failed_stages=[])
            write_json_atomic(paths.proposer_trajectories / f"{a.assignment_id}.json", trajectory)


def solver_attempts(paths: RunPaths, chat) -> dict:
    """Attempts of the shared model on one env (two model calls each), as the rollout runner files them."""
    env = EnvRollouts(load_task(SEEDS / "greeting-file"), "env-greeting")
    for k, reward in enumerate(SOLVER_REWARDS):
        recorder = TrajectoryRecorder("tiny-solver", "tiny")
        messages = [{"role": "user", "content": "Write hello to /app/greeting.txt"}]
        for _ in range(2):
            result = chat.chat(messages)
            recorder.add_agent_step(result, None)
            messages += [{"role": "assistant", "content": result.text},
                         {"role": "user", "content": "[exit code 0]"}]
        path = paths.trajectories / env.env_id / "tiny" / f"{k}.json"
        write_json_atomic(path, recorder.finish(reward=reward))
        env.records.append(AttemptRecord(env.env_id, "tiny", k, reward, "ok", path=str(path)))
    return {env.env_id: env}


def generated_tokens(path) -> int:
    steps = json.loads(path.read_text())["steps"]
    return sum(len(s["metrics"]["completion_token_ids"]) for s in steps if s["source"] == "agent")


def test_one_update_trains_the_shared_policy_on_both_roles_with_separate_baselines(tmp_path):
    cfg = compose_config(["solver=tiny", "proposer=tiny", "solver.seed=4242", "flywheel.shared_policy=true",
                          "flywheel.proposer_samples=3", "harness=prompt", "harness.context_chars=1200",
                          "trainer.envs_per_update=1", "trainer.attempts_per_env=4", "trainer.lr=1e-3"])
    paths = RunPaths(tmp_path / "run")
    solver = build_trainable_solver(cfg, RunBudget(cfg.budget), paths)
    try:
        chat = solver.chat  # shared policy: the proposer is the solver's own chat model
        proposer_episodes(cfg, paths, chat, tmp_path)
        rollouts = solver_attempts(paths, chat)

        groups = solver.proposer_groups(paths.proposer_trajectories, 0)
        assert [(g.key, g.role, g.rewards) for g in groups] == [("r0-0", PROPOSER, [1.0, 0.0, 0.5])]
        assert [g.key for g in solver.proposer_groups(paths.proposer_trajectories, 1)] == ["r1-0"]
        solver_groups = solver.groups_of(rollouts)
        assert [(g.role, g.rewards) for g in solver_groups] == [(SOLVER, SOLVER_REWARDS)]

        before = [p.detach().clone() for p in solver.policy.model.parameters()]
        metrics = MetricsLogger(cfg.logger, paths.root)
        stats = train_step(solver, solver_groups + groups, 2, metrics, step=1, round=1, update=1)
        metrics.close()
    finally:
        solver.close()

    proposer_files = [paths.proposer_trajectories / f"r0-0-{i}.json" for i in range(3)]
    solver_files = [paths.trajectories / "env-greeting" / "tiny" / f"{k}.json" for k in range(4)]
    assert all(generated_tokens(p) > 0 for p in proposer_files + solver_files)
    # both roles' tokens are in the update, each centred on its own group's mean
    assert stats["loss_tokens"] == sum(generated_tokens(p) for p in proposer_files + solver_files)
    assert stats["groups_kept"] == 2 and stats["truncated_tokens"] == 0
    assert stats["proposer/reward_mean"] == pytest.approx(0.5) and stats["solver/reward_mean"] == pytest.approx(0.4375)
    assert stats["skipped_sequences"] >= 1  # the r_P = 0.5 episode sits on its group's mean: advantage 0
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-3)  # mu is what the shared policy sampled with
    assert stats["step"] == 1 and solver.policy.version == 1  # the rollout engine serves the new weights
    assert any(not torch.equal(a, b) for a, b in zip(before, solver.policy.model.parameters()))
    [row] = [json.loads(line) for line in paths.metrics.read_text().splitlines() if '"update"' in line]
    assert row["dppo/proposer/reward_mean"] == pytest.approx(0.5)
