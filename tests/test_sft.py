"""The cold start (mode=sft, paper App. H): the supervised step is the token-mean NLL of the
assistant tokens only, the policy learns a fixed answer, the filters pick what they say,
hosted-model trajectories (no token ids) are rendered with the policy's chat template (tool
calls fenced or native), and the CLI writes a checkpoint that DPPO's restore loads."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import aes.run  # noqa: F401  (registers mode=sft until the schema lists it)
from aes.agents import prompts
from aes.agents.trajectory import TrajectoryRecorder, write_json_atomic
from aes.config import ConfigError, ModelConfig, TrainerConfig, compose_config
from aes.config.schema import DeepSpeedConfig
from aes.models.base import ChatResult
from aes.models.hf_chat import Policy
from aes.models.tiny import build_model, build_tokenizer
from aes.train import PolicyTrainer, Sample
from aes.train.batching import collate
from aes.train.dppo import token_logprobs
from aes.train.render import sft_turns, trajectory_messages
from aes.train.sft import SFTConfig, build_examples, select_trajectories, tool_format_for

os.environ.setdefault("DS_ACCELERATOR", "cpu")
REPO = Path(__file__).resolve().parents[1]

ANSWER = "```bash\nls -la /app\n```"
QUESTIONS = ["Please list the files in the current directory and show the contents of the readme.",
             "What is the total of the sales column? The answer is forty two.",
             "The command failed with an error: no such file or directory. Let me fix the path.",
             "Run one shell command at a time and read its output before the next step."]
BASH = {"name": "bash", "description": "Run one shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
SUBMIT = {"name": "submit", "description": "Finish.", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def fresh_policy(seed: int = 0) -> Policy:
    """The tiny model and tokenizer of ``solver=tiny`` (same preset and seed), not the process cache."""
    tokenizer = build_tokenizer()
    model = build_model("tiny-qwen2", len(tokenizer), seed=seed, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    return Policy(model=model, tokenizer=tokenizer, name=f"tiny@{seed}")


def config(**overrides) -> TrainerConfig:
    ds = overrides.pop("deepspeed", {})
    base = {"lr": 1e-2, "envs_per_update": 4, "attempts_per_env": 8, "max_seq_len": 512, "micro_batch_tokens": 1024,
            "temperature": 1.0}
    return TrainerConfig(**(base | overrides), deepspeed=DeepSpeedConfig(**({"zero_stage": 0} | ds)))


def rollout_trajectory(policy: Policy, question: str, reward: float, turns: int = 2) -> dict:
    """A solver attempt as the rollout engine records it (token ids and log-probs), whose
    assistant always answers ANSWER; tool output comes back as a user turn."""
    recorder = TrajectoryRecorder("aes-terminal-agent", "tiny-qwen2")
    recorder.add_message("system", prompts.FENCED_SYSTEM)
    recorder.add_message("user", question)
    messages = [{"role": "system", "content": prompts.FENCED_SYSTEM}, {"role": "user", "content": question}]
    answer = policy.encode(ANSWER) + [policy.tokenizer.eos_token_id]
    for _ in range(turns):
        prompt = policy.prompt_ids(messages)
        result = ChatResult(text=ANSWER, prompt_token_ids=prompt, completion_token_ids=answer,
                            completion_logprobs=[-1.0] * len(answer))
        step = recorder.add_agent_step(result, None)
        recorder.observe(step, None, "[exit code 0]\nREADME.md data.csv")
        messages += [{"role": "assistant", "content": ANSWER},
                     {"role": "user", "content": "[exit code 0]\nREADME.md data.csv"}]
    return recorder.finish(reward=reward)


def hosted_trajectory(question: str = "Write 42 to /app/answer.txt.", reward: float = 1.0,
                      command: str = "echo 42 > /app/answer.txt") -> dict:
    """A solver attempt of a hosted model with function calling: messages only, no token ids."""
    recorder = TrajectoryRecorder("aes-terminal-agent", "claude-sonnet", [BASH, SUBMIT])
    recorder.add_message("system", prompts.TOOLS_SYSTEM)
    recorder.add_message("user", question)
    calls = [("toolu_01", "bash", {"command": command}, "Let me write it.", "[exit code 0]\n"),
             ("toolu_02", "submit", {}, "", "submitted")]
    for call_id, name, args, text, output in calls:
        result = ChatResult(text=text, tool_calls=[])
        step = recorder.add_agent_step(result, SimpleNamespace(id=call_id, name=name, arguments=args))
        recorder.observe(step, call_id, output)
    return recorder.finish(reward=reward, fenced_mode=False)


def masked_text(policy: Policy, samples: list[Sample]) -> list[str]:
    """The trained tokens of each sample, decoded run by run."""
    runs = []
    for s in samples:
        current: list[int] = []
        for token, m in zip(s.input_ids, s.loss_mask):
            if m:
                current.append(token)
            elif current:
                runs.append(policy.tokenizer.decode(current))
                current = []
        if current:
            runs.append(policy.tokenizer.decode(current))
    return runs


# -- the supervised step ----------------------------------------------------------------


def test_the_step_is_the_token_mean_nll_of_assistant_tokens_and_masked_tokens_add_nothing():
    policy = fresh_policy(seed=3)
    reference = copy.deepcopy(policy.model)
    gen = torch.Generator().manual_seed(0)
    ids = lambda n: torch.randint(3, 900, (n,), generator=gen).tolist()  # noqa: E731
    # prompt | answer | tool output | answer ; and a shorter one: prompt | answer
    samples = [Sample(ids(30), [0] * 12 + [1] * 6 + [0] * 8 + [1] * 4, [0.0] * 30),
               Sample(ids(14), [0] * 9 + [1] * 5, [0.0] * 14)]
    cfg = config(lr=1e-3, max_seq_len=30, micro_batch_tokens=30, deepspeed={"gradient_clipping": 0.0})  # one row per micro-batch
    stats = PolicyTrainer(cfg, policy).sft_update(samples)
    assert stats["micro_batches"] == 2 and stats["loss_tokens"] == 15 and stats["step"] == 1

    # by hand: -mean log p over the 15 assistant targets only, one plain AdamW step
    optimizer = torch.optim.AdamW(reference.parameters(), lr=cfg.lr, weight_decay=0.0, eps=1e-8)
    mb = collate(samples, pad_id=policy.tokenizer.pad_token_id)
    logits = reference(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[:, :-1]
    logp = token_logprobs(logits, mb.targets)[0]
    loss = -(logp * mb.loss_mask).sum() / mb.loss_mask.sum()
    loss.backward()
    optimizer.step()
    assert stats["loss"] == pytest.approx(loss.item(), abs=1e-5)
    worst = max((a - b).abs().max().item() for a, b in zip(policy.model.parameters(), reference.parameters()))
    assert worst < 1e-5

    # masked targets are context only: other prompt/tool tokens after the last answer token
    # leave the loss and the update unchanged
    a, b = fresh_policy(seed=3), fresh_policy(seed=3)
    tail = [Sample(s.input_ids + ids(7), s.loss_mask + [0] * 7, [0.0] * (len(s) + 7)) for s in samples]
    sa = PolicyTrainer(config(lr=1e-3), a).sft_update(samples)
    sb = PolicyTrainer(config(lr=1e-3), b).sft_update(tail)
    assert sa["loss"] == pytest.approx(sb["loss"], abs=1e-6) and sa["loss_tokens"] == sb["loss_tokens"]
    # (float noise only: Adam's first step moves every weight by about lr = 1e-3)
    assert max((p - q).abs().max().item() for p, q in zip(a.model.parameters(), b.model.parameters())) < 1e-5


def test_sft_on_rollouts_lowers_the_nll_of_the_answer(tmp_path):
    policy = fresh_policy()
    for i, question in enumerate(QUESTIONS):
        write_json_atomic(tmp_path / "trajectories" / f"env{i}" / "tiny" / "0.json",
                          rollout_trajectory(policy, question, reward=1.0))
    selection = select_trajectories(tmp_path, SFTConfig())
    examples = build_examples(selection.kept, policy, max_seq_len=512)
    assert len(examples) == 4 and {e.tokens_from for e in examples} == {"ids"}
    samples = [s for e in examples for s in e.samples]
    # only the assistant's answers (with their end-of-turn token) are trained, never the
    # system prompt, the question or the tool output between the turns
    assert masked_text(policy, samples) == [ANSWER + "<|im_end|>"] * 8
    trainer = PolicyTrainer(config(), policy)
    before = trainer.nll(samples)["nll"]
    history = [trainer.sft_update(samples) for _ in range(10)]
    after = trainer.nll(samples)["nll"]
    assert history[0]["loss"] == pytest.approx(before, rel=1e-4)
    assert after < 0.4 * before, (before, after)
    assert history[-1]["loss"] < history[0]["loss"]


# -- what is selected --------------------------------------------------------------------


def _write(path, data: dict, stamp: str) -> None:
    for step in data["steps"]:
        step["timestamp"] = stamp
    write_json_atomic(path, data)


def proposer_episode(outcome: str, assignment: str) -> dict:
    recorder = TrajectoryRecorder("aes-proposer-prompt", "claude-sonnet")
    recorder.add_message("system", "You build training tasks for a terminal agent.")
    recorder.add_message("user", f"Assignment {assignment}: build a harder task.")
    recorder.add_agent_step(ChatResult(text='<file path="instruction.md">Sum the column.</file>'), None)
    return recorder.finish(assignment={"assignment_id": assignment, "round": 0}, outcome=outcome)


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    solver = run / "trajectories" / "envA" / "tiny"
    _write(solver / "0.json", hosted_trajectory(reward=1.0), "2026-01-01T00:00:00+00:00")
    _write(solver / "1.json", hosted_trajectory(reward=0.5), "2026-01-02T00:00:00+00:00")
    _write(solver / "2.json", hosted_trajectory(reward=1.0), "2026-01-03T00:00:00+00:00")
    _write(solver / "infra" / "3.json", hosted_trajectory(reward=1.0), "2026-01-04T00:00:00+00:00")
    unscored = hosted_trajectory(reward=1.0)
    unscored["extra"]["reward"] = None
    _write(solver / "4.json", unscored, "2026-01-04T00:00:00+00:00")
    for name, outcome in (("a1", "admitted"), ("a2", "valid"), ("a3", "broken")):
        _write(run / "proposer" / "proposer_trajectories" / f"{name}.json", proposer_episode(outcome, name),
               "2026-01-05T00:00:00+00:00")
    # the proposer's workspace holds a copy of a solver attempt; other JSON is not a trajectory
    copy_path = run / "proposer" / "workspaces" / "a1" / "past_trajectories" / "envA" / "tiny" / "0.json"
    copy_path.parent.mkdir(parents=True)
    copy_path.write_text((solver / "0.json").read_text())
    (run / "calibration.json").write_text(json.dumps([{"env_id": "envA"}]))
    (run / "trajectories" / "index.jsonl").write_text("{}\n")
    return run


def names(selection) -> list[str]:
    return sorted(t.path.stem for t in selection.kept)


def test_filters_pick_roles_outcomes_rewards_and_the_newest_or_a_seeded_draw(run_dir):
    default = select_trajectories(run_dir, SFTConfig())
    assert names(default) == ["0", "2", "a1"]  # admitted proposer episodes, solver reward >= 1
    assert default.found == 7  # distinct, outside infra/
    assert default.skipped == Counter({"duplicate": 1, "infrastructure failure": 1,
                                       "solver reward < 1 or none": 2,
                                       "proposer outcome not in ['admitted']": 2})
    assert names(select_trajectories(run_dir, SFTConfig(role="proposer"))) == ["a1"]
    assert names(select_trajectories(run_dir, SFTConfig(role="solver"))) == ["0", "2"]
    assert names(select_trajectories(run_dir, SFTConfig(role="proposer", proposer_outcomes=["admitted", "valid"]))) \
        == ["a1", "a2"]
    assert names(select_trajectories(run_dir, SFTConfig(role="solver", min_reward=0.5))) == ["0", "1", "2"]
    assert names(select_trajectories(run_dir, SFTConfig(max_trajectories=2))) == ["2", "a1"]  # newest
    draw = lambda seed: names(select_trajectories(run_dir, SFTConfig(max_trajectories=1, select="random"), seed))  # noqa: E731
    assert draw(7) == draw(7)
    assert len({draw(seed)[0] for seed in range(12)}) > 1
    # a subtree works too: the proposer's own directory
    assert names(select_trajectories(run_dir / "proposer" / "proposer_trajectories", SFTConfig())) == ["a1"]
    with pytest.raises(ConfigError, match="sft.role"):
        SFTConfig(role="critic")


# -- hosted-model trajectories --------------------------------------------------------------


def test_a_hosted_trajectory_without_ids_is_rendered_with_the_chat_template_and_trained(tmp_path):
    policy = fresh_policy()
    trajectory = hosted_trajectory()
    assert tool_format_for(ModelConfig(name="tiny", backend="tiny", model="tiny-qwen2"), "auto") == "fenced"
    turns, how = sft_turns(trajectory, policy.tokenizer, tool_format="fenced",
                           eos_token_ids=policy.eos_token_ids)
    assert how == "rendered" and len(turns) == 2
    # the tools-mode chat becomes the fenced-block chat the tiny policy acts in: the system
    # prompt of that mode, the bash call as a fenced block, submit as DONE, results as user turns
    first_prompt = policy.tokenizer.decode(turns[0].prompt_ids)
    assert first_prompt == policy.render([{"role": "system", "content": prompts.FENCED_SYSTEM},
                                          {"role": "user", "content": "Write 42 to /app/answer.txt."}])
    assert policy.tokenizer.decode(turns[0].completion_ids) == \
        "Let me write it.\n```bash\necho 42 > /app/answer.txt\n```<|im_end|>"
    assert policy.tokenizer.decode(turns[1].completion_ids) == "DONE<|im_end|>"
    assert "<|im_start|>user\n[exit code 0]\n<|im_end|>" in policy.tokenizer.decode(turns[1].prompt_ids)

    for i, question in enumerate(QUESTIONS):
        write_json_atomic(tmp_path / f"{i}.json", hosted_trajectory(question, command="ls -la /app"))
    examples = build_examples(select_trajectories(tmp_path, SFTConfig()).kept, policy, 512, tool_format="fenced")
    assert {e.tokens_from for e in examples} == {"rendered"}
    samples = [s for e in examples for s in e.samples]
    assert sorted(set(masked_text(policy, samples))) == ["DONE<|im_end|>",
                                                         "Let me write it.\n" + ANSWER + "<|im_end|>"]
    trainer = PolicyTrainer(config(), policy)
    before = trainer.nll(samples)["nll"]
    for _ in range(20):
        trainer.sft_update(samples)
    assert trainer.nll(samples)["nll"] < 0.4 * before


NATIVE_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}<|im_start|>system\n{{ m['content'] }}"
    "{% if tools %}{{ '\n# Tools' }}{% for t in tools %}{{ '\n' + t['function']['name'] }}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% elif m['role'] == 'assistant' %}<|im_start|>assistant\n{{ m['content'] }}"
    "{% for c in m.get('tool_calls') or [] %}<tool_call>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] | tojson }}</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m['role'] == 'tool' %}<|im_start|>user\n<tool_response>{{ m['content'] }}</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_native_tool_calls_use_the_templates_own_syntax_and_foreign_ids_are_rendered():
    policy = fresh_policy()
    tokenizer = copy.deepcopy(policy.tokenizer)
    tokenizer.chat_template = NATIVE_TEMPLATE  # a template that renders tool_calls (Qwen-like)
    trajectory = hosted_trajectory()
    assert [m["role"] for m in trajectory_messages(trajectory, "native")] == \
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    turns, how = sft_turns(trajectory, tokenizer, tool_format="auto", eos_token_ids=policy.eos_token_ids)
    assert how == "rendered"
    assert tokenizer.decode(turns[0].completion_ids) == \
        'Let me write it.<tool_call>bash {"command": "echo 42 > /app/answer.txt"}</tool_call><|im_end|>'
    assert tokenizer.decode(turns[1].completion_ids) == "<tool_call>submit {}</tool_call><|im_end|>"
    prompt = tokenizer.decode(turns[1].prompt_ids)
    assert prompt.startswith(f"<|im_start|>system\n{prompts.TOOLS_SYSTEM}\n# Tools\nbash\nsubmit<|im_end|>")
    assert "<tool_response>[exit code 0]\n</tool_response>" in prompt

    # ids written by another tokenizer (another model's rollouts) are not trusted: rendered instead
    foreign = rollout_trajectory(policy, QUESTIONS[0], 1.0)
    for step in foreign["steps"]:
        if step["source"] == "agent":
            step["metrics"]["prompt_token_ids"] = [5] * len(step["metrics"]["prompt_token_ids"])
    assert sft_turns(foreign, policy.tokenizer, eos_token_ids=policy.eos_token_ids)[1] == "rendered"
    assert sft_turns(rollout_trajectory(policy, QUESTIONS[0], 1.0), policy.tokenizer)[1] == "ids"


# -- the CLI -----------------------------------------------------------------------------


def test_mode_sft_needs_trajectories(tmp_path):
    from aes.run import dispatch

    with pytest.raises(ConfigError, match="mode=sft needs trajectories=DIR"):
        dispatch(compose_config(["mode=sft", "solver=tiny"]), tmp_path)


def clean_env() -> dict[str, str]:
    """This process's environment without the process-group variables its own trainers set
    (aes.train.engine.ensure_distributed): a child would take them for a launcher's and try to
    listen on this process's MASTER_PORT."""
    dist = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return {k: v for k, v in os.environ.items() if k not in dist} | {"DS_ACCELERATOR": "cpu"}


def test_cli_fine_tunes_and_writes_a_checkpoint_dppo_restores(tmp_path):
    from transformers import AutoModelForCausalLM

    from aes.train.policy import TrainableSolver

    data = tmp_path / "data"
    for i, question in enumerate(QUESTIONS):
        write_json_atomic(data / "trajectories" / f"env{i}" / "claude" / "0.json",
                          hosted_trajectory(question, command="ls -la /app"))
    write_json_atomic(data / "trajectories" / "env0" / "claude" / "1.json", hosted_trajectory(reward=0.0))
    write_json_atomic(data / "proposer" / "proposer_trajectories" / "a1.json", proposer_episode("admitted", "a1"))
    run = tmp_path / "run"
    overrides = ["solver=tiny", "trainer.lr=0.01", "trainer.max_seq_len=1024", "trainer.micro_batch_tokens=4096"]
    proc = subprocess.run([sys.executable, "-m", "aes.run", "mode=sft", f"trajectories={data}", *overrides,
                           f"hydra.run.dir={run}"], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env=clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    data_row = next(r for r in rows if r["event"] == "sft_data")
    assert data_row["trajectories"] == 5 and data_row["proposer"] == 1 and data_row["rendered"] == 5
    steps = [r for r in rows if r["event"] == "sft_step"]
    assert len(steps) == 1 and steps[-1]["trajectories_used"] == 5  # 5 trajectories, 8 per step
    assert steps[0]["sft/loss"] > 0 and steps[0]["sft/loss_tokens"] > 0 and steps[0]["trajectories"] == 5
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_1"

    # DPPO's restore (what the flywheel and mode=train call) loads it into a fresh solver=tiny policy
    cfg = compose_config(overrides)
    trained, fresh = fresh_policy(), fresh_policy()
    solver = TrainableSolver(cfg, SimpleNamespace(close=lambda: None), trained)
    solver.restore(run / "checkpoints")
    assert solver.trainer.step == 1
    examples = build_examples(select_trajectories(data, SFTConfig(role="solver")).kept, trained, 1024,
                              tool_format="fenced")
    samples = [s for e in examples for s in e.samples]
    assert solver.trainer.nll(samples)["nll"] < PolicyTrainer(config(), fresh).nll(samples)["nll"]
    # and the exported model is the same weights
    exported = AutoModelForCausalLM.from_pretrained(run / "sft_model")
    state = dict(trained.model.named_parameters())
    assert all(torch.equal(p, state[name]) for name, p in exported.named_parameters())
    solver.close()
