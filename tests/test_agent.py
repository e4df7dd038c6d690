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


# -- several tool calls in one reply ---------------------------------------------------------------

def _answered(messages: list[dict]) -> None:
    """Every tool call of every assistant turn has exactly one tool result, in both providers' formats."""
    from aes.models.anthropic_client import convert_messages as to_anthropic
    from aes.models.openai_client import convert_messages as to_openai

    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in to_openai(messages) if m["role"] == "tool"]
    assert calls and sorted(results) == sorted(calls)
    _, turns = to_anthropic(messages)
    for i, turn in enumerate(turns):
        uses = [b["id"] for b in turn["content"] if b.get("type") == "tool_use"]
        if uses:  # answered in the next user turn, one result each
            answered = [b["tool_use_id"] for b in turns[i + 1]["content"] if b.get("type") == "tool_result"]
            assert sorted(answered) == sorted(uses)


@pytestmark_docker
def test_parallel_tool_calls_all_run_in_order_each_with_its_result(runner, tmp_path):
    """The answer is only right when both commands run, in order: with the first call alone it is '4'."""
    calls = [ToolCall("c1", "bash", {"command": "printf 4 > /app/answer.txt"}),
             ToolCall("c2", "bash", {"command": "printf '2\\n' >> /app/answer.txt"}),
             ToolCall("c3", "browse", {"url": "http://example.com"})]
    model = Scripted([reply("Two steps at once.", calls=calls), reply(calls=[ToolCall("c4", "submit", {})])],
                     tools=True)
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig()))
    assert result.reward == 1.0 and result.agent_info["end_reason"] == EndReason.DONE
    second = model.seen[1]
    assert [c["id"] for c in second[-4]["tool_calls"]] == ["c1", "c2", "c3"]
    assert [(m["role"], m["tool_call_id"]) for m in second[-3:]] == [("tool", "c1"), ("tool", "c2"), ("tool", "c3")]
    assert second[-1]["content"].startswith("not run: 'browse'") and "tools: bash, submit" in second[-1]["content"]
    _answered(second)
    step = result.agent_info["trajectory"]["steps"][2]
    assert [c["tool_call_id"] for c in step["tool_calls"]] == ["c1", "c2", "c3"]
    assert [r["source_call_id"] for r in step["observation"]["results"]] == ["c1", "c2", "c3"]


@pytestmark_docker
def test_submit_among_parallel_calls_ends_after_the_calls_before_it(runner, tmp_path):
    calls = [ToolCall("c1", "bash", {"command": "echo 42 > /app/answer.txt"}), ToolCall("c2", "submit", {}),
             ToolCall("c3", "bash", {"command": "rm /app/answer.txt"})]
    agent = TerminalAgent(Scripted([reply(calls=calls)], tools=True), AgentConfig())
    result = runner.run(load_task(make_task(tmp_path)), agent)
    assert result.reward == 1.0 and result.agent_info["end_reason"] == EndReason.DONE
    results = result.agent_info["trajectory"]["steps"][2]["observation"]["results"]
    assert [r["content"].splitlines()[0] for r in results] == [
        "[exit code 0]", "submitted", "not run: submit ended the episode before this call"]


# -- context compaction ----------------------------------------------------------------------------

class Sized(Scripted):
    """Reports the prompt it was sent as its usage (4 characters a token), as a server counts it."""

    def __init__(self, replies, context_length: int):
        super().__init__(replies)
        self.config = ModelConfig(name="sized", backend="scripted", model="sized", max_tokens=100,
                                  context_length=context_length)

    def _chat_once(self, messages, tools, max_tokens, temperature):
        from dataclasses import replace

        result = super()._chat_once(messages, tools, max_tokens, temperature)
        return replace(result, usage=Usage(sum(len(str(m.get("content") or "")) for m in messages) // 4, 20))


def test_compaction_drops_the_oldest_outputs_first_and_keeps_the_latest():
    from aes.agents.compaction import Output, compact

    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    outputs = []
    for i in range(5):
        messages += [{"role": "assistant", "content": f"cmd {i}"}, {"role": "user", "content": str(i) * 3000}]
        outputs.append(Output(len(messages) - 1, step_id=3 + i))
    assert compact(messages, outputs, 3000, 100, 10_000, 0.8, 0.5, 2) == (3000, None)  # below the trigger
    context, record = compact(messages, outputs, 9000, 100, 10_000, 0.8, 0.5, 2)
    assert record["dropped_outputs_of_steps"] == [3, 4, 5]  # oldest first; the 2 latest are kept
    assert context == 9000 - 3 * ((3000 - len(messages[3]["content"])) // 4) and record["estimated_tokens_after"] == context
    assert messages[3]["content"] == "[output dropped to fit the context: 3000 characters of the result of step 3]"
    assert messages[-1]["content"] == "4" * 3000 and messages[-3]["content"] == "3" * 3000
    assert [m["content"] for m in messages[:3]] == ["s", "task", "cmd 0"]  # nothing but outputs is touched
    _, again = compact(messages, outputs, 9000, 100, 10_000, 0.8, 0.5, 2)
    assert again is None  # nothing left to drop: the episode then ends at the context limit


@pytestmark_docker
@pytest.mark.parametrize("compact_at", [0.8, None])
def test_a_long_episode_is_compacted_instead_of_ending_at_the_context(runner, tmp_path, compact_at):
    noisy = reply("```bash\nhead -c 1500 /dev/zero | tr '\\0' z\n```")
    model = Sized([noisy] * 6 + [reply("```bash\necho 42 > /app/answer.txt\n```"), reply("DONE")], 2000)
    cfg = AgentConfig(compact_at=compact_at, compact_to=0.5, compact_keep=2)
    result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, cfg))
    trajectory = result.agent_info["trajectory"]
    if compact_at is None:  # the same episode without compaction runs out of context before the answer
        assert result.agent_info["end_reason"] == EndReason.CONTEXT_LIMIT and result.reward == 0.0
        assert "compactions" not in trajectory["extra"]
        return
    assert result.agent_info["end_reason"] == EndReason.DONE and result.reward == 1.0
    compactions = trajectory["extra"]["compactions"]
    assert compactions and compactions[0]["dropped_outputs_of_steps"][0] == 3  # the first command's output
    last = model.seen[-1]
    stubs = [m for m in last if m["content"].startswith("[output dropped to fit the context")]
    assert len(stubs) == sum(len(c["dropped_outputs_of_steps"]) for c in compactions) >= 2
    assert last[-1]["content"].startswith("[exit code 0]")  # the latest output is whole
    whole = [s for s in trajectory["steps"] if s.get("observation")][0]["observation"]["results"][0]["content"]
    assert whole.count("z") == 1500  # the trajectory keeps every output


@pytestmark_docker
def test_parallel_calls_from_vllm_through_the_sdk_all_run(runner, tmp_path, monkeypatch):
    """qwen.yaml allows parallel calls (vLLM would otherwise drop all but the first of the calls the
    policy generated): a recorded vLLM reply with two calls, through the real OpenAI SDK, runs both."""
    import copy

    from aes.config import compose_config
    from aes.models import build_model
    from tests.replay import offline, recorded, replay_server

    offline(monkeypatch, "AES_TEST_MODEL_KEY")
    submit = copy.deepcopy(recorded("vllm_parallel_tool_calls"))
    message = submit["body"]["choices"][0]["message"]
    message["tool_calls"] = [{"id": "chatcmpl-tool-5c7e9a1b3d5f4c8e", "type": "function",
                              "function": {"name": "submit", "arguments": "{}"}}]
    message["reasoning"] = None
    with replay_server() as server:
        server.push("vllm_parallel_tool_calls", submit)
        cfg = compose_config(["proposer=qwen", f"proposer.base_url={server.url}/v1"])
        model = build_model(cfg.proposer)
        result = runner.run(load_task(make_task(tmp_path)), TerminalAgent(model, AgentConfig()))
        model.close()
    assert result.reward == 1.0 and result.agent_info["end_reason"] == EndReason.DONE
    first, second = server.bodies
    assert "parallel_tool_calls" not in first and [t["function"]["name"] for t in first["tools"]] == ["bash", "submit"]
    ids = ["chatcmpl-tool-8f2a1c3e5b7d4a9f", "chatcmpl-tool-1b3d5f7a9c2e4b6d"]
    assert [c["id"] for c in second["messages"][-3]["tool_calls"]] == ids
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in second["messages"][-2:]] == [
        ("tool", ids[0], "[exit code 0]\n"), ("tool", ids[1], "[exit code 0]\n")]
    step = result.agent_info["trajectory"]["steps"][2]
    assert step["reasoning_content"].startswith("Write the two digits")
    assert [r["source_call_id"] for r in step["observation"]["results"]] == ids
