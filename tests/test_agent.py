"""The terminal agent's loop: actions, end reasons, trajectories (scripted replies drive control flow)."""

from __future__ import annotations

import json

import pytest

from aes.agents import EndReason, TerminalAgent, parse_action
from aes.config import AgentConfig, ModelConfig
from aes.models import BaseChatModel, ChatResult, ToolCall, Usage
from aes.sandbox import Outcome, TrialRunner
from aes.tasks import load_task
from tests.conftest import make_task


def reply(text: str = "", calls: list[ToolCall] | None = None) -> ChatResult:
    return ChatResult(text=text, tool_calls=calls or [], usage=Usage(10, 5))


def test_parse_fenced_block_and_done():
    assert parse_action(reply("run this:\n```bash\nls -la /app\n```\nthen more")).command == "ls -la /app"
    assert parse_action(reply("```\necho hi\n```")).command == "echo hi"
    assert parse_action(reply("All finished.\nDONE")).done
    assert parse_action(reply("```bash\necho first\n```\n```bash\necho second\n```")).command == "echo first"
    nothing = parse_action(reply("I think we should look at the files."))
    assert nothing.command is None and not nothing.done


def test_parse_tool_calls():
    call = ToolCall(id="c1", name="bash", arguments={"command": "pwd"})
    assert parse_action(reply(calls=[call])).command == "pwd"
    assert parse_action(reply(calls=[ToolCall(id="c2", name="submit", arguments={})])).done
    bad = parse_action(reply(calls=[ToolCall(id="c3", name="bash", arguments={}, raw_arguments="{oops")]))
    assert bad.command is None


class Scripted(BaseChatModel):
    """Replays fixed replies: drives the agent's control flow in tests, not a model."""

    def __init__(self, replies: list[ChatResult], tools: bool = False):
        super().__init__(ModelConfig(name="scripted", backend="scripted", model="scripted"))
        self.replies = list(replies)
        self.supports_tools = tools
        self.seen: list[list[dict]] = []

    def _chat_once(self, messages, tools, max_tokens, temperature):
        self.seen.append([dict(m) for m in messages])
        return self.replies.pop(0) if self.replies else reply("DONE")


@pytest.fixture
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


pytestmark_docker = pytest.mark.docker


@pytestmark_docker
def test_fenced_episode_solves_and_records_an_atif_trajectory(runner, tmp_path):
    model = Scripted([reply("```bash\necho 42 > /app/answer.txt\n```"), reply("DONE")])
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0
    traj = result.agent_info["trajectory"]
    assert traj["schema_version"] == "ATIF-v1.8" and result.agent_info["end_reason"] == EndReason.DONE
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent"]
    first = traj["steps"][2]
    assert first["tool_calls"][0]["arguments"] == {"command": "echo 42 > /app/answer.txt"}
    assert first["observation"]["results"][0]["extra"]["exit_code"] == 0
    assert traj["final_metrics"]["total_prompt_tokens"] == 20
    json.dumps(traj)  # serialisable as is
    assert model.seen[1][-1]["content"].startswith("[exit code 0]")


@pytestmark_docker
def test_tool_call_episode_uses_tool_messages(runner, tmp_path):
    model = Scripted([reply(calls=[ToolCall("c1", "bash", {"command": "echo 42 > /app/answer.txt"})]),
                      reply(calls=[ToolCall("c2", "submit", {})])], tools=True)
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig()))
    assert result.reward == 1.0
    second_prompt = model.seen[1]
    assert second_prompt[-2]["tool_calls"][0]["id"] == "c1"
    assert second_prompt[-1] == {"role": "tool", "tool_call_id": "c1", "content": "[exit code 0]\n"}


@pytestmark_docker
def test_replies_without_commands_end_the_episode(runner, tmp_path):
    model = Scripted([reply("hmm")] * 5)
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(max_format_errors=3)))
    assert result.agent_info["end_reason"] == EndReason.FORMAT_ERRORS
    assert len(model.seen) == 3 and result.reward == 0.0


@pytestmark_docker
def test_turn_limit(runner, tmp_path):
    model = Scripted([reply("```bash\ntrue\n```")] * 10)
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(max_turns=4)))
    assert result.agent_info["end_reason"] == EndReason.MAX_TURNS and len(model.seen) == 4


@pytestmark_docker
def test_time_limit_cuts_a_long_command(runner, tmp_path):
    toml = '[agent]\ntimeout_sec = 2\n[environment]\nnetwork_mode = "no-network"\n'
    model = Scripted([reply("```bash\nsleep 100\n```")] * 3)
    result = runner.run(load_task(make_task(tmp_path, toml=toml)), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.AGENT_TIMEOUT and result.reward == 0.0
    assert result.agent_info["end_reason"] == EndReason.TIMEOUT


@pytestmark_docker
def test_long_output_is_truncated_for_the_model(runner, tmp_path):
    model = Scripted([reply("```bash\nseq 1 100000\n```"), reply("DONE")])
    runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(observation_chars=500)))
    observation = model.seen[1][-1]["content"]
    assert len(observation) < 700 and "characters omitted" in observation
    assert observation.rstrip().endswith("100000")


@pytestmark_docker
def test_hints_are_appended_to_the_instruction(runner, tmp_path):
    model = Scripted([reply("DONE")])
    runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(), hints="echo 42"))
    assert "reference solution" in model.seen[0][1]["content"] and "echo 42" in model.seen[0][1]["content"]


class Updated(Scripted):
    """Its weights change while an episode runs, as an update does under a carried rollout."""

    def __init__(self, replies, update_after: list[int]):
        super().__init__(replies)
        self.update_after = update_after

    def _chat_once(self, messages, tools, max_tokens, temperature):
        result = super()._chat_once(messages, tools, max_tokens, temperature)
        if len(self.seen) in self.update_after:
            self.weights_updated()  # the next call is served by the new weights
        return result


@pytestmark_docker
def test_a_carried_episode_records_the_policy_version_of_every_turn(runner, tmp_path):
    model = Updated([reply("```bash\ntrue\n```"), reply("```bash\necho 42 > /app/answer.txt\n```"), reply("DONE")],
                    update_after=[1])
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(), max_policy_span=2))
    steps = [s for s in result.agent_info["trajectory"]["steps"] if s["source"] == "agent"]
    assert [s["extra"]["policy_version"] for s in steps] == [0, 1, 1] and result.reward == 1.0
    assert result.agent_info["trajectory"]["extra"]["policy_versions"] == [0, 1]


@pytestmark_docker
def test_an_episode_carried_past_its_span_ends(runner, tmp_path):
    model = Updated([reply("```bash\ntrue\n```")] * 6, update_after=[1, 2, 3])
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig(), max_policy_span=1))
    assert result.agent_info["end_reason"] == EndReason.POLICY_SPAN and len(model.seen) == 2


@pytestmark_docker
def test_the_agent_shell_runs_as_the_tasks_agent_user(runner, tmp_path):
    """``[agent] user`` holds for the solver's shell as for the oracle: a root-only file stays closed."""
    toml = ('[agent]\ntimeout_sec = 60\nuser = "nobody"\n[verifier]\ntimeout_sec = 60\n'
            '[environment]\nnetwork_mode = "no-network"\n')
    dockerfile = ("FROM python:3.12-slim\nWORKDIR /app\nRUN chmod 777 /app && echo secret > /root.txt "
                  "&& chmod 600 /root.txt\n")
    model = Scripted([reply("```bash\nid -un > /app/who; cat /root.txt > /app/leak 2>&1; echo 42 > /app/answer.txt\n```"),
                      reply("```bash\ncat /app/who /app/leak\n```"), reply("DONE")])
    task = load_task(make_task(tmp_path, toml=toml, dockerfile=dockerfile))
    result = runner.run(task, TerminalAgent(model, AgentConfig()))
    observation = model.seen[2][-1]["content"]
    assert "nobody" in observation and "Permission denied" in observation and "secret" not in observation
    assert result.reward == 1.0


def test_tasks_name_their_action_sets_in_metadata(caplog, monkeypatch):
    from types import SimpleNamespace

    from aes.agents.toolboxes import ACTION_SETS, declared_actions

    monkeypatch.setitem(ACTION_SETS, "browser", "aes.agents.mcp")  # any importable module
    monkeypatch.setitem(ACTION_SETS, "desktop", "aes.agents.mcp")
    monkeypatch.setitem(ACTION_SETS, "ghost", "aes.agents.no_such_action_set")

    def task(actions):
        return SimpleNamespace(name="t", spec=SimpleNamespace(metadata={"actions": actions}))

    assert declared_actions(task("browser")) == ["browser"]
    assert declared_actions(task(["desktop", "browser"])) == ["desktop", "browser"]
    assert declared_actions(task(["teleport"])) == [] and "unknown action set" in caplog.text
    assert declared_actions(task(["ghost", "browser"])) == ["browser"] and "not in this installation" in caplog.text
    assert declared_actions(SimpleNamespace(name="t", spec=SimpleNamespace(metadata={}))) == []
