"""No silent zeros: a model server that cannot be reached never turns into a reward.

The agent (solver and terminal proposer) lets ``ModelUnavailable`` out of an episode instead of
ending it as ``model_error`` (which the verifier would score as 0); a prompt-harness proposer
episode cut short by it gets no outcome (no r_P) and leaves its assignment open; and
``python -m aes.run`` stops at the health check, before Docker, naming the server. Real HTTP
against a closed local port or a local server replaying recorded replies; no Docker, no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aes.agents import EndReason, TerminalAgent
from aes.config import AgentConfig, HarnessConfig, ModelConfig
from aes.errors import InfrastructureError
from aes.models import ModelError, ModelUnavailable, build_model
from aes.tasks import load_task
from tests.conftest import REPO, SEEDS, make_task
from tests.test_model_clients import _env as _no_proxy  # noqa: F401 - autouse: no proxy, a test key
from tests.test_model_clients import closed_port, server  # noqa: F401 - the replay server fixture

openai_client = pytest.importorskip("aes.models.openai_client")


def qwen(base_url: str) -> openai_client.OpenAIChat:
    """The vLLM solver client at ``base_url``, failing at once (no retries)."""
    return openai_client.OpenAIChat(ModelConfig(name="qwen", backend="openai_compatible", model="Qwen/Qwen3-8B",
                                                base_url=base_url, max_retries=0, timeout_sec=5.0))


class NoContainer:
    """Stands in for a container the agent never gets to use (the first model call fails)."""

    api = None

    def status(self):
        return "running", None, False


# ---------------------------------------------------------------- the solver's agent


def test_agent_run_raises_model_unavailable_instead_of_ending_the_episode(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    agent = TerminalAgent(qwen(url), AgentConfig())
    with pytest.raises(ModelUnavailable) as err:
        agent.run(load_task(make_task(tmp_path)), NoContainer(), timeout=60)
    assert isinstance(err.value, InfrastructureError)  # what the trial runner catches
    assert url in str(err.value)


def test_an_ordinary_model_error_still_ends_the_episode(server, tmp_path):
    server.push("vllm_context_length_400")  # the request's fault, not the server's
    agent = TerminalAgent(qwen(server.url + "/v1"), AgentConfig())
    run = agent.run(load_task(make_task(tmp_path)), NoContainer(), timeout=60)
    assert run.info["end_reason"] == EndReason.MODEL_ERROR
    assert "maximum context length" in run.output
    assert run.info["trajectory"]["extra"]["error"] == run.output


# ---------------------------------------------------------------- proposer episodes


def _episode(tmp_path: Path, model, max_revisions: int = 1, harness_cfg: HarnessConfig | None = None):
    """A prompt-harness proposer episode on a seed parent (no draft reaches admission: no Docker)."""
    from aes.config import compose_config
    from aes.domains import instructions_dir
    from aes.pool import AssignmentLog, PoolStore
    from aes.proposer.assignments import SIMPLER, Assignment
    from aes.proposer.episode import run_episode
    from aes.proposer.harness import PromptHarness
    from aes.proposer.workspace import build_workspace

    cfg = compose_config([])
    pool = PoolStore(tmp_path / "pool")
    parent, _ = pool.add(SEEDS / "greeting-file", name="greeting-file", status="admitted", source="seed")
    assignment = Assignment(parent.env_id, parent.name, "qwen", None, None, SIMPLER)
    assignment.assignment_id = AssignmentLog(pool).open(0, parent.env_id, assignment.to_dict())
    workspace = build_workspace(tmp_path / "ws", assignment, pool, tmp_path / "trajectories",
                                instructions_dir(cfg.domain), tmp_path / "proposer")
    harness = PromptHarness(model, harness_cfg or HarnessConfig(), None)

    def run():
        return run_episode(assignment, workspace, harness, None, pool, max_revisions, tmp_path / "proposer")

    def status():
        return AssignmentLog(pool).rows()[0]["status"]

    return run, status, assignment, harness


def test_proposer_episode_with_an_unreachable_model_gets_no_outcome(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    run, status, assignment, _ = _episode(tmp_path, qwen(url))
    with pytest.raises(ModelUnavailable, match=url):
        run()
    # nothing where r_P is read from; the partial trajectory kept aside; the assignment redone on resume
    assert not (tmp_path / "proposer" / "proposer_trajectories").exists()
    aside = json.loads((tmp_path / "proposer" / "infrastructure_failures"
                        / f"{assignment.assignment_id}.json").read_text())
    assert aside["extra"]["outcome"] is None and url in aside["extra"]["infrastructure_error"]
    assert status() == "open"


def test_proposer_episode_with_an_ordinary_model_error_is_broken(server, tmp_path):
    server.push("vllm_context_length_400", "vllm_context_length_400")
    run, status, assignment, _ = _episode(tmp_path, qwen(server.url + "/v1"))
    result = run()
    assert result.outcome == "broken" and result.failed_stages == ["no_draft", "no_draft"]
    trajectory = json.loads(Path(result.trajectory_path).read_text())
    assert trajectory["extra"]["outcome"] == "broken"
    assert status() == "closed"


# ---------------------------------------------------------------- in-process models


def test_tiny_model_health_check():
    pytest.importorskip("torch")
    model = build_model(ModelConfig(name="tiny", backend="tiny", model="tiny-qwen2"))
    model.health_check()
    model.close()
    with pytest.raises(ModelUnavailable, match="tiny: model is closed"):
        model.health_check()
    with pytest.raises(ModelUnavailable, match="not loaded"):
        model.chat([{"role": "user", "content": "hi"}])
    assert issubclass(ModelUnavailable, ModelError)


# ---------------------------------------------------------------- the whole command


def test_eval_with_no_model_server_stops_at_the_health_check(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    # An engine that does not exist: reaching Docker at all would fail with a different message.
    env["DOCKER_HOST"] = f"unix://{tmp_path}/no-docker.sock"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "aes.run", "mode=eval", "solver=qwen", f"solver.base_url={url}",
         f"tasks={SEEDS / 'greeting-file'}", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert url in output and "solver.base_url" in output and "Connection refused" in output
    assert "Traceback" not in output and "Docker" not in output
    assert not (tmp_path / "run" / "eval.json").exists()
    assert time.monotonic() - started < 120


def test_a_prompt_episode_starts_no_model_call_once_its_budget_is_spent(tmp_path):
    """The prompt arms keep ``harness.episode_timeout_sec`` as the terminal harness does: a slow first
    reply spends the budget, and no revision calls the model again; the episode says why it ended."""
    from tests.test_agent import Scripted, reply

    class Slow(Scripted):
        def _chat_once(self, messages, tools, max_tokens, temperature):
            time.sleep(0.6)
            return super()._chat_once(messages, tools, max_tokens, temperature)

    model = Slow([reply("no task here")] * 3)
    run, _, _, harness = _episode(tmp_path, model, max_revisions=2, harness_cfg=HarnessConfig(episode_timeout_sec=0.5))
    result = run()
    assert result.revisions == 2 and result.failed_stages == ["no_draft"] * 3  # the revisions did happen
    assert len(model.seen) == 1, model.seen
    assert "budget is spent (harness.episode_timeout_sec = 0.5 s)" in harness.note
