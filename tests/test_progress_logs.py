"""Long phases say what they do in the log: admission stage by stage (with seconds), every attempt
of calibration, parent rollouts and evaluation, and the proposer's turns — those without a command
included."""

from __future__ import annotations

import logging
import re
import time

import pytest

from aes.agents.terminal import EndReason, Episode
from aes.config import AgentConfig
from aes.tasks import load_task
from tests.conftest import SEEDS, make_task
from tests.test_agent import Scripted, reply


@pytest.fixture(scope="module")
def simulated_log(tmp_path_factory) -> list[str]:
    """The log of one generation of ``experiment=simulated`` with a benchmark evaluated (in-process)."""
    from aes.compose import build_flywheel
    from aes.config import compose_config
    from aes.flywheel import Flywheel

    cfg = compose_config(["experiment=simulated", "flywheel.rounds=1", "flywheel.proposer_interval=1",
                          "flywheel.assignments_per_round=1", "flywheel.proposer_samples=1", f"eval.tasks={SEEDS}",
                          "eval.attempts=2"])
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = Keep(level=logging.INFO), logging.getLogger("aes")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        flywheel = Flywheel(build_flywheel(cfg, tmp_path_factory.mktemp("run")))
        try:
            flywheel.run()
        finally:
            flywheel.close()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return lines


def _matching(lines: list[str], pattern: str) -> list[str]:
    return [line for line in lines if re.search(pattern, line)]


def test_admission_logs_each_stage_with_its_seconds(simulated_log):
    for stage in ("static ok", "build ok"):
        assert _matching(simulated_log, rf"^admission \S+: {stage} \(\d+\.\d s\)$"), stage
    assert _matching(simulated_log, r"^admission \S+: oracle: reference ok, reward 1 \(\d+\.\d s\)$")
    assert _matching(simulated_log, r"^admission \S+: no-op: doing nothing ok, reward 0 \(\d+\.\d s\)$")


# experiment=simulated: parent rollouts and calibration both 4 attempts (calibration.initial_attempts), eval 2
@pytest.mark.parametrize("label,attempts", [("parent rollouts", 4), ("calibration", 4), ("eval", 2)])
def test_every_attempt_of_calibration_parent_rollouts_and_eval_is_a_line(simulated_log, label, attempts):
    head = re.escape(label) + r" \[scripted, [^\]]+\]"
    [start] = _matching(simulated_log, rf"^{head}: \d+ attempt\(s\) on \d+ env\(s\) starting$")[:1]
    total = int(re.search(r": (\d+) attempt", start).group(1))
    lines = _matching(simulated_log, rf"^{head}: \S+ attempt \d+/{attempts}: reward \d\.\d\d \(\S+, \d+\.\d s\); "
                                     r"\d+/\d+ done(, ~\d+(\.\d)? (s|min|h) left)?$")
    assert len(lines) >= total and any(line.endswith(f"; {total}/{total} done") for line in lines)
    assert any(re.search(r"; \d+/\d+ done, ~\d+(\.\d)? (s|min|h) left$", line) for line in lines)  # the time left
    assert _matching(simulated_log, rf"^{head}: {total} attempt\(s\) done in \d+\.\d s, mean reward \d\.\d+, "
                                    r"0 without a reward$")


def test_the_proposer_generation_counts_its_episodes(simulated_log):
    assert _matching(simulated_log, r"^generation 1: proposer episodes 1/1 done$")


def test_time_left_is_the_pace_so_far_times_what_is_left(monkeypatch):
    from aes.report import progress

    clock = iter([100.0, 160.0, 220.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    p = progress.Progress(5)  # starts at 100
    assert p.step() == "1/5 done, ~4 min left"  # 60 s for the first of 5
    assert p.step(3) == "4/5 done, ~30 s left"  # 120 s for 4: 30 s each
    assert progress.remaining(5401) == "1.5 h" and progress.remaining(61) == "2 min" and progress.remaining(0.2) == "1 s"


@pytest.mark.docker
def test_a_turn_without_a_command_is_logged(sandbox, tmp_path, caplog):
    task = load_task(make_task(tmp_path))
    model = Scripted([reply("Let me think about the layout first."), reply(""), reply("```bash\necho hi\n```"),
                      reply("DONE")])
    with sandbox.start(sandbox.build(task).image, task) as container:
        episode = Episode(model, AgentConfig(max_turns=6), container, "system", progress="a000-test")
        with caplog.at_level(logging.INFO, logger="aes"):
            end = episode.send("Write the task.", time.monotonic() + 120)
        episode.shell.close()
    assert end == EndReason.DONE
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("a000-test turn")]
    assert lines[:3] == [
        "a000-test turn 1: no command in the reply (format error 1 of 3): 'Let me think about the layout first.'",
        "a000-test turn 2: no command in the reply (format error 2 of 3): empty reply",
        "a000-test turn 3: $ echo hi -> [exit code 0]",
    ]
