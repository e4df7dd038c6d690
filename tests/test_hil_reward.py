"""The shaped reward of human-in-the-loop tasks (``hil.shaped_reward_weight``) feeds the DPPO
advantage only; the task reward stays the attempt's reward for eval, calibration and the cold start.

A scripted solver asks about both blockers (Ask-F1 1) and then gets one of the two tested details
wrong (task reward 0.5): with weight 0.5 its shaped reward is 1.0, which must never pass for
success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aes.models import ChatResult, ModelConfig, Usage
from aes.models.base import BaseChatModel
from tests.test_hil import hil_task

pytestmark = pytest.mark.docker

SCRIPT = ["```bash\nask_human What late fee percentage applies?\n```",
          "```bash\nask_human Which currency do we bill in?\n```",
          "```bash\necho '1.5 USD' > /app/out.txt\n```",
          "DONE"]


class AsksThenSlips(BaseChatModel):
    """Replies by turn number (stateless, so concurrent attempts each follow the script), with
    token ids and log-probs so the trajectories can be trained on."""

    def __init__(self):
        super().__init__(ModelConfig(name="asks-then-slips", backend="scripted", model="scripted"))

    def _chat_once(self, messages, tools, max_tokens, temperature):
        turn = sum(m["role"] == "assistant" for m in messages)
        return ChatResult(text=SCRIPT[min(turn, len(SCRIPT) - 1)], usage=Usage(10, 5),
                          prompt_token_ids=[1, 2, 3], completion_token_ids=[4, 5], completion_logprobs=[-0.5, -0.5])


@pytest.fixture
def shaped(tmp_path):
    from aes.compose import build_rollouts, build_trials
    from aes.config import compose_config
    from aes.paths import RunPaths
    from aes.tasks import load_task

    cfg = compose_config(["hil.shaped_reward_weight=0.5", "hil.setting=ask_human"])
    runner = build_rollouts(cfg, RunPaths(tmp_path / "run"), AsksThenSlips(), build_trials(cfg))
    return cfg, runner, load_task(hil_task(tmp_path))


def test_the_task_reward_scores_eval_and_the_shaped_one_trains(shaped):
    from aes.rollout.evaluate import evaluate
    from aes.train.episodes import episode_from_trajectory
    from aes.train.sft import select_trajectories

    cfg, runner, task = shaped
    report = evaluate(runner, [task], k=1, show_progress=False)
    assert report.avg_at_k == 0.5 and report.pass_at_k == 0.0 and report.tasks[0].rewards == [0.5]
    assert report.success_rate == report.tasks[0].success_rate == 0.0  # binary success beside the mean reward
    assert report.hil["mean_reward"] == 0.5 and report.hil["success_rate"] == 0.0 and report.hil["ask_f1"] == 1.0
    path = Path(runner.path(task.slug, 0))
    data = json.loads(path.read_text())
    assert (data["extra"]["reward"], data["extra"]["reward_shaped"]) == (0.5, 1.0)  # both recorded
    assert episode_from_trajectory(data, 4096, str(path)).reward == 1.0  # what the advantage is computed from
    kept = select_trajectories(runner.root, cfg.sft)  # sft.min_reward = 1: a half-right attempt is no demonstration
    assert cfg.sft.min_reward == 1.0 and kept.kept == []


def test_calibration_reads_the_task_reward(shaped):
    from aes.calibration import Calibrator

    cfg, runner, task = shaped
    (result,) = Calibrator(cfg.calibration, runner).calibrate([task])
    assert result.rewards == [0.5] * cfg.calibration.initial_attempts
    assert result.decision.verdict != "too_easy"
