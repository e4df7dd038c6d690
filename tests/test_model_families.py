"""What a served model's family needs (aes/models/families.py), tool calls written as text
(aes/agents/terminal.py), the Qwen-style tools template of the stand-ins (aes/models/export.py), and
the direction of imports in aes/train and aes/cluster. No server here (tests/test_vllm.py has one)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from aes.agents import parse_action
from aes.config import ConfigError
from aes.models import ChatResult, ToolCall
from aes.models.families import family_of, plan_context
from tests.conftest import REPO

QWEN3 = {"model_type": "qwen3", "max_position_embeddings": 40960, "rope_theta": 1000000}
SMOLLM2 = {"model_type": "llama", "max_position_embeddings": 8192, "rope_theta": 100000}


def test_qwen_models_get_the_hermes_parser_and_llama_ones_fenced_blocks():
    assert family_of(QWEN3).tool_parser == "hermes"
    assert family_of({"model_type": "qwen2"}).tool_parser == "hermes"
    assert family_of(SMOLLM2).tool_parser is None and family_of({"model_type": "mamba"}).name == "unknown"


def test_context_within_the_models_positions_needs_no_override():
    plan = plan_context(QWEN3, 32768, model="q")
    assert plan.max_model_len == 32768 and plan.overrides == {}


def test_qwen3_at_128k_gets_its_model_cards_yarn_for_server_and_trainer():
    plan = plan_context(QWEN3, 131072, model="q")
    rope = plan.overrides["rope_parameters"]
    assert (rope["rope_type"], rope["factor"], rope["original_max_position_embeddings"]) == ("yarn", 4.0, 32768)
    assert rope["rope_theta"] == 1000000 and plan.overrides["max_position_embeddings"] == 131072


def test_a_context_no_recipe_reaches_stops_with_what_to_set():
    with pytest.raises(ConfigError, match="lower solver.context_length to 40960, or set solver.rope_scaling"):
        plan_context(QWEN3, 262144, model="q")
    with pytest.raises(ConfigError, match="no rope-scaling recipe for its family \\(llama\\)"):
        plan_context(SMOLLM2, 16384, model="s")


def test_explicit_rope_scaling_is_used_and_checked():
    explicit = {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192},
                "max_position_embeddings": 16384}
    assert plan_context(SMOLLM2, 16384, model="s", explicit=explicit).overrides == explicit
    with pytest.raises(ConfigError, match="exceeds what s reads with solver.rope_scaling"):
        plan_context(SMOLLM2, 32768, model="s", explicit=explicit)


def test_a_tool_call_written_as_text_is_run():
    text = 'I will list it.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la /app"}}\n</tool_call>'
    action = parse_action(ChatResult(text=text))
    assert action.command == "ls -la /app" and not action.native and action.call.name == "bash"
    assert parse_action(ChatResult(text='<tool_call>{"name": "submit", "arguments": {}}</tool_call>')).done
    # arguments as a JSON string, and an unclosed call at the end of a reply cut by max_tokens
    assert parse_action(ChatResult(text='<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}'
                                        '</tool_call>')).command == "pwd"
    assert parse_action(ChatResult(text='<tool_call>{"name": "bash", "arguments": {"command": "id"}}')).command == "id"
    # a native call wins over text; broken text is no action
    native = parse_action(ChatResult(text=text, tool_calls=[ToolCall("c", "bash", {"command": "pwd"})]))
    assert native.command == "pwd" and native.native
    assert parse_action(ChatResult(text="<tool_call>{not json}</tool_call>")).command is None


def test_the_stand_ins_template_renders_tools_calls_and_results_the_qwen_way(tmp_path):
    from aes.models.export import export_tiny
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export_tiny(tmp_path / "m"))
    assert not json.loads((tmp_path / "m" / "config.json").read_text())["tie_word_embeddings"]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]},
                {"role": "tool", "tool_call_id": "a", "content": "out"}]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nS\n\n") and '<tools>\n{"type": "function"' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\nout\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_training_imports_point_one_way():
    """aes/train: backends on top (policy, sync, trainer never import it); aes/cluster above aes/train
    (nothing in aes/train imports aes.cluster: the job fills registries there instead)."""
    train = REPO / "aes" / "train"
    for path in train.glob("*.py"):
        found = imports_of(path)
        assert not any(m.startswith("aes.cluster") for m in found), (path.name, found)
        if path.name not in ("backends.py", "__init__.py"):
            assert "aes.train.backends" not in found, path.name
    assert "aes.train.policy" not in imports_of(train / "sync.py")
    assert "aes.train.sync" not in imports_of(train / "vllm_reload.py") | imports_of(train / "weights.py")


def test_the_trainer_loads_a_long_context_model_with_the_servers_rope_scaling(tmp_path):
    """A Qwen3 of 40,960 positions asked for 131,072: the trainer's copy gets YaRN (factor 4 over 32,768)
    as vLLM does, and its rotary embedding is YaRN's (attention scaling from the factor)."""
    from aes.config import compose_config
    from aes.models.export import export_tiny
    from aes.train.backends import load_served_policy

    model_dir = export_tiny(tmp_path / "q3", preset="tiny-qwen3-vllm", max_positions=40960)
    cfg = compose_config(["solver=qwen", f"solver.model={model_dir}"])
    model = load_served_policy(cfg)
    rope = model.config.rope_parameters
    assert (rope["rope_type"], rope["factor"], rope["original_max_position_embeddings"]) == ("yarn", 4.0, 32768)
    assert model.config.max_position_embeddings == 131072
    assert model.model.rotary_emb.attention_scaling > 1.0  # YaRN's mscale: not the default rope
    plain = load_served_policy(compose_config(["solver=qwen", f"solver.model={model_dir}",
                                               "solver.context_length=32768"]))
    assert plain.config.rope_parameters["rope_type"] == "default" and plain.model.rotary_emb.attention_scaling == 1.0
