"""The flywheel's dynamics, in seconds: the simulated sandbox and scripted solver and proposer
(``experiment=simulated``) run 20 generations with self-play, and the loop must do what the
paper says it does (§3.3, App. G.1) — one property per test, all read off one run."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest

from aes.compose import build_flywheel
from aes.config import compose_config
from aes.flywheel import Flywheel
from aes.pool import AssignmentLog
from aes.sandbox.simulated import difficulty

ROUNDS = 20


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("simulated")
    cfg = compose_config(["experiment=simulated", f"flywheel.rounds={ROUNDS}"])
    flywheel = Flywheel(build_flywheel(cfg, run_dir))
    try:
        seeds = [difficulty(e.load()) for e in _seed(flywheel)]
        flywheel.run()
    finally:
        flywheel.close()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return cfg, run_dir, flywheel, rows, seeds


def _seed(flywheel):
    from aes.proposer.generate import seed_pool

    seed_pool(flywheel.stack)
    return flywheel.pool.envs("admitted")


def test_every_generation_reads_the_newest_policys_rollouts(run):
    cfg, _, _, rows, _ = run
    rounds = [r for r in rows if r["event"] == "round"]
    assert len(rounds) == ROUNDS
    assigned = [r for r in rounds if r["assignments/count"]]  # a full pool opens no assignment
    assert len(assigned) >= ROUNDS // 2
    for row in assigned:  # the policy that made the rollouts is the policy of that moment, not round one's
        assert row["assignments/rollout_update"] == row["assignments/policy_version"], row
    assert len({r["assignments/rollout_update"] for r in assigned}) > len(assigned) // 2


def test_the_solver_is_trained_every_step_and_the_proposer_once_per_generation(run):
    cfg, run_dir, flywheel, rows, _ = run
    steps = [r for r in rows if r["event"] in ("update", "no_update")]
    assert len(steps) == ROUNDS * cfg.flywheel.proposer_interval
    with_proposer = [r for r in steps if r["proposer/groups"]]
    assert with_proposer and all(r["proposer/trained_once"] for r in with_proposer)
    per_round = Counter(r["round"] for r in with_proposer)
    assert max(per_round.values()) == 1  # once per generation, never again
    assert all(r["proposer/samples_per_group"] == cfg.flywheel.proposer_samples for r in with_proposer)
    # every proposer group with reward spread of every generation was trained, and exactly once
    trajectories = run_dir / "proposer" / "proposer_trajectories"
    groups = {g.key for round_ in range(ROUNDS) for g in flywheel.solver.proposer_groups(trajectories, round_)}
    times = flywheel.pool.get_meta("flywheel.proposer_group_updates", {})
    assert groups and times == {key: 1 for key in groups}
    assert sum(r["proposer/groups"] for r in with_proposer) == len(groups)


def test_every_env_a_refresh_retires_is_replaced_and_the_pool_recovers(run):
    """Each refresh's retirees are answered by the next generation: ``replacements_per_retired``
    new envs each (``ceil(retired x that / proposer_samples)`` assignments, within the pool's room),
    nothing left queued; the pool, thinned by every refresh, is back near its size after the next
    generation instead of sitting at ``min_pool``."""
    from aes.flywheel import replacement_assignments

    cfg, _, flywheel, rows, _ = run
    fw, k = cfg.flywheel, cfg.flywheel.proposer_interval
    rounds = {r["round"]: r for r in rows if r["event"] == "round"}
    refreshes = [r for r in rows if r["event"] == "refresh"]
    answered = 0
    for refresh in refreshes:
        answer = rounds.get((refresh["step"] - 1) // k + 2)  # the generation right after the refresh
        if answer is None:  # the run ended first: the retirees are still queued
            assert len(flywheel.pool.get_meta("flywheel.replacements", [])) == refresh["retired"]
            continue
        # the pool at that generation's assignments: the round before, and the envs that had waited for room
        before = rounds[answer["round"] - 1]["pool_size"] + answer["entered_pool/after_waiting"]
        capacity = -(-max(fw.pool_size - before, 0) // fw.proposer_samples)
        wanted = replacement_assignments(refresh["retired"], fw.replacements_per_retired, fw.proposer_samples)
        assert refresh["replacements"] == wanted
        assert answer["assignments/retired_since_last"] == refresh["retired"]
        assert answer["assignments/replacements"] == min(wanted, capacity) > 0
        assert answer["pool_size"] >= min(refresh["pool"], fw.pool_size) * 0.75, (refresh, answer)
        answered += 1
    assert answered >= len(refreshes) - 1 > 0
    late = [rounds[r]["pool_size"] for r in sorted(rounds)[ROUNDS // 2:]]
    assert statistics.fmean(late) > 2 * fw.min_pool


def test_refresh_retires_what_the_improved_solver_always_solves_and_replaces_it(run):
    cfg, _, flywheel, rows, _ = run
    refreshes = [r for r in rows if r["event"] == "refresh"]
    assert len(refreshes) >= ROUNDS * cfg.flywheel.proposer_interval // cfg.trainer.updates_per_refresh - 1
    assert sum(r["retired"] for r in refreshes) > 0 and sum(r["replacements"] for r in refreshes) > 0
    retired = flywheel.pool.envs("retired")
    assert any((e.mean_reward or 0) > cfg.calibration.band_high for e in retired)
    parents = {row["parent_id"] for row in AssignmentLog(flywheel.pool).rows()}
    assert parents & {e.env_id for e in retired}  # replacements were assigned from the retired envs


def test_the_pool_gets_harder_as_the_solver_gets_better(run):
    _, run_dir, flywheel, rows, seeds = run
    skill = flywheel.solver.chat.skill
    assert skill > 2.0  # learnt from its groups' advantages (see the next test), not counted per update
    updates = [r for r in rows if r["event"] == "update"]
    assert sum(r["dppo/skill_gain"] for r in updates) == pytest.approx(skill)
    assert all(r["dppo/skill_gain"] >= 0 for r in updates)  # centred advantages never unlearn
    admitted = [difficulty(e.load()) for e in flywheel.pool.envs("admitted")]
    assert statistics.fmean(admitted) > statistics.fmean(seeds) + 1.0


def test_the_simulated_update_learns_from_the_advantages_of_its_groups():
    """One update of the simulated solver: a policy-gradient step with the groups' advantages, so
    an empty batch or flat groups teach nothing, spread teaches in proportion to its variance."""
    from aes.models.scripted import ScriptedModel
    from aes.train.episodes import Episode, Group
    from aes.train.simulated import LEARNING_RATE, SimulatedSolver, skill_gradient

    cfg = compose_config(["experiment=simulated"])
    solver = SimulatedSolver(cfg, ScriptedModel(cfg.solver))
    group = lambda rewards: Group("env", [Episode([], r) for r in rewards])  # noqa: E731
    assert solver.update([], 0)["skill_gain"] == 0.0
    assert solver.update([group([0.5] * 8)], 1)["skill_gain"] == 0.0
    spread = group([0.0, 0.25, 0.5, 0.5, 0.5, 0.5, 0.75, 1.0])
    variance = statistics.pvariance(spread.rewards)
    stats = solver.update([spread], 1)
    assert stats["skill_gain"] == pytest.approx(LEARNING_RATE * 8 * variance / cfg.trainer.envs_per_update)
    assert stats["skill"] == pytest.approx(stats["skill_gain"])
    assert skill_gradient(group([1.0, 0.0])) > skill_gradient(group([0.75, 0.25])) > 0


def test_the_proposer_reflects_between_rounds(run):
    _, run_dir, _, rows, _ = run
    diffs = sorted((run_dir / "proposer" / "reflection").glob("round_*.diff"))
    assert len(diffs) == ROUNDS and all("memory/notes.md" in d.read_text() for d in diffs)


def test_a_killed_run_resumes_where_it_stopped(run, tmp_path):
    cfg, run_dir, flywheel, rows, _ = run
    again = Flywheel(build_flywheel(cfg, Path(run_dir)))
    try:
        again.run()  # everything is done: nothing runs again
    finally:
        again.close()
    after = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r for r in after if r["event"] in ("update", "no_update", "round")] == \
        [r for r in rows if r["event"] in ("update", "no_update", "round")]


def test_a_static_pool_is_evaluated_as_it_trains(tmp_path):
    """experiment=static_pool's switches on the simulated loop: no proposer, no review of the pool,
    a benchmark evaluated at update 0 and every eval.every updates."""
    from tests.conftest import SEEDS

    cfg = compose_config(["experiment=simulated", "flywheel.rounds=2", "flywheel.assignments_per_round=0",
                          "flywheel.refresh=false", f"eval.tasks={SEEDS}", "eval.every=2", "eval.attempts=2"])
    flywheel = Flywheel(build_flywheel(cfg, tmp_path))
    try:
        before = {e.env_id for e in _seed(flywheel)}
        flywheel.run()
        assert {e.env_id for e in flywheel.pool.envs("admitted")} == before  # the pool did not change
    finally:
        flywheel.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["event"] == "eval"]
    assert [r["update"] for r in evals] == [0, 2, 4] and all(0 <= r["eval/avg@2"] <= 1 for r in evals)
    assert not [r for r in rows if r["event"] == "refresh"]


def test_each_round_says_where_its_time_went(run):
    _, _, _, rows, _ = run
    rounds = [r for r in rows if r["event"] == "round"]
    for row in rounds:
        stages = {k.split("/", 1)[1] for k in row if k.startswith("seconds/")}
        assert {"parent_rollouts", "proposer", "solver_rollouts", "update"} <= stages, row
        assert all(row[f"seconds/{s}"] >= 0 for s in stages)
    assert any("seconds/admission" in r for r in rounds)  # simulated proposals reach admission


def test_updates_take_the_policys_own_generation_rollouts_before_rolling_again(run):
    """Parent rollouts, calibration and refresh attempts of the current policy are on-policy
    groups: an update uses those with spread (each once) before it rolls those envs out again."""
    _, run_dir, flywheel, rows, _ = run
    updates = [r for r in rows if r["event"] == "update"]
    assert sum(r["solver/groups_reused"] for r in updates) > 0
    assert all(r["solver/groups_reused"] <= r["solver/groups"] for r in updates)
    used = flywheel.pool.get_meta("flywheel.used_rollouts", [])
    assert used and len(used) == len(set(used)) and not any("-train" in k for k in used)
    index = [json.loads(line) for line in (run_dir / "trajectories" / "index.jsonl").read_text().splitlines()]
    versions = {f"{r['env_id']}@{r['batch']}": r["policy_version"] for r in index}
    assert all(k.split("@", 1)[1].startswith(f"u{versions[k]:04d}-") for k in used)  # only the policy's own


def test_hinted_evaluation_training_retired_and_stale_rollouts_never_train_again(tmp_path):
    """What an update may take from the index: the current policy's own generation rollouts of an
    admitted env, whole and scored, once. A hinted diagnostic attempt (the solution in its prompt),
    an evaluation batch (the benchmark), a training batch already used, a retired env, an older
    policy's rollouts and a group with an unscored attempt must never come back as training data."""
    cfg = compose_config(["experiment=simulated", "flywheel.rounds=1"])
    flywheel = Flywheel(build_flywheel(cfg, tmp_path))
    try:
        a, b, c, d = _seed(flywheel)[:4]
        flywheel.pool.set_status(d.env_id, "retired")
        name = flywheel.rollouts.solver_name

        def row(env, batch, solver=name, version=0, errors=0, rewards=(0.0, 1.0)):
            return {"env_id": env.env_id, "task": env.name, "solver": solver, "attempts": len(rewards),
                    "rewards": list(rewards), "errors": errors, "batch": batch, "policy_version": version,
                    "paths": [f"{env.env_id}/{batch}/{i}.json" for i in range(len(rewards) - errors)]}

        rows = [row(a, "u0000-g0", solver=f"{name}-diagnostic"), row(a, "eval-u0000"),
                row(a, "u0000-s00000-train"), row(d, "u0000-g0-assign"), row(c, "u0000-g0", version=1),
                row(c, "u0000-g0-assign", errors=1, rewards=(0.0, 1.0, None)),
                row(b, "u0000-g0-assign")]
        index = flywheel.rollouts.root / "index.jsonl"
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text("".join(json.dumps(r) + "\n" for r in rows))
        groups, _ = flywheel.unused_groups()
        assert [g.meta["env_id"] for g in groups] == [b.env_id]
        assert flywheel.unused_groups()[0] == []  # each batch trains once
    finally:
        flywheel.close()


def test_the_pool_never_holds_more_than_its_size(run):
    """flywheel.pool_size is a cap, reached in this run (generations open ceil(room / proposer_samples)
    assignments of 2 episodes each, so one episode too many can land in the band): envs that find the pool
    full wait; each round counts its entries apart from what passed the checks (the store's own cap is
    tested with episodes admitting at once in tests/test_pool.py)."""
    cfg, _, flywheel, rows, _ = run
    fw = cfg.flywheel
    rounds = [r for r in rows if r["event"] == "round"]
    assert max(r["pool_size"] for r in rounds) == fw.pool_size  # the cap was reached ...
    assert all(r["pool_size"] <= fw.pool_size for r in rounds)  # ... and never passed
    assert len(flywheel.pool.envs("admitted")) <= fw.pool_size
    for r in rounds:
        assert r["valid"] >= r["accepted"] >= r["calibrated"] and r["entered_pool"] >= 0
    assert sum(r["entered_pool"] for r in rounds) == flywheel.pool.ever_admitted()
