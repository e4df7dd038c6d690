"""DPPO train-step throughput and peak memory next to TRL's GRPOTrainer; the CPU rollout engine.

    python benchmarks/train_step.py [--models tiny smollm2] [--steps N] [--no-rollout] [--json OUT]

Train step (one table row per model x trainer, each in a fresh process so peak RSS is its own):
the same model, the same batch (B sequences of P prompt + C completion tokens, on-policy
log-probs, groups of G with centred advantages) and one optimizer step per batch. aes runs
``DPPOTrainer.update`` (DeepSpeed ZeRO-1, CPU accelerator, gloo, torch AdamW, clip 1.0: the
default config); TRL runs ``GRPOTrainer`` steps whose generation is replaced by the same
fixed batch (beta 0, no reference model, clip 1.0), so both time forward + loss + backward +
clip + AdamW. Reported: the fastest of the timed steps (the least disturbed by other load),
trained (prompt + completion) tokens/s,
and peak RSS: the whole process and its growth over the loaded model (``step mem``).

Rollout engine (SmolLM2-135M, CPU): completion tokens/s of transformers (hf_chat, KV cache,
fp32, the weights the trainer updates) and of llama.cpp (xllamacpp) on the shipped Q4_1 GGUF
and on a GGUF re-exported from the transformers weights (what llama.cpp would need after every
update: export + engine reload, timed), and how far each engine's log-probs are from the
trainer's pi on the same tokens (mean |logp diff|; share of tokens with |pi - mu| > 0.1, which
DPPO would mask for one sign of the advantage).

Figures depend on the machine's load; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SHAPES = {"tiny": {"batch": 32, "prompt": 64, "completion": 192, "group": 8},
          "smollm2": {"batch": 8, "prompt": 64, "completion": 128, "group": 4}}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def peak_mb() -> float:
    """Peak RSS since the last :func:`reset_peak` (VmHWM)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def reset_peak() -> None:
    """Restart the peak-RSS count here, so that loading the model does not set it."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def load(model: str):
    """(model, tokenizer) of a benchmark model."""
    if model == "tiny":
        from aes.models.tiny import build_model, build_tokenizer

        tok = build_tokenizer()
        return build_model("tiny-qwen2", len(tok), seed=0, eos_token_id=tok.eos_token_id,
                           pad_token_id=tok.pad_token_id), tok
    from aes.models.hf_chat import load_gguf_policy

    policy = load_gguf_policy("smollm2-135m-instruct")
    # the weights are dequantised fp32, but transformers still flags a GGUF model as quantised,
    # which TRL's Trainer refuses to fine-tune
    policy.model.is_quantized, policy.model.hf_quantizer = False, None
    return policy.model, policy.tokenizer


def make_batch(model, shape: dict, seed: int = 0) -> dict:
    """Random prompts/completions, on-policy log-probs and centred group rewards."""
    import torch

    g = torch.Generator().manual_seed(seed)
    b, p, c = shape["batch"], shape["prompt"], shape["completion"]
    vocab = model.config.vocab_size
    ids = torch.randint(10, vocab - 10, (b, p + c), generator=g)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, p - 1:-1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, p:, None])[..., 0]
    rewards = torch.rand(b, generator=g)
    groups = rewards.view(-1, shape["group"])
    advantages = (groups - groups.mean(1, keepdim=True)).flatten()
    return {"ids": ids, "logp": logp, "rewards": rewards, "advantages": advantages, "p": p}


ZERO_STAGE = int(os.environ.get("AES_BENCH_ZERO", "0"))
"""ZeRO stage of the aes rows (0: one CPU process shards nothing, so stage 1-2 only add buffers)."""


def run_aes(model, tok, batch: dict, shape: dict, steps: int, checkpointing: bool) -> list[float]:
    from aes.config import TrainerConfig
    from aes.config.schema import DeepSpeedConfig
    from aes.train import DPPOTrainer, Episode, Group, Sample

    b, p, c, gsize = shape["batch"], shape["prompt"], shape["completion"], shape["group"]
    groups = []
    for k in range(b // gsize):
        episodes = []
        for i in range(k * gsize, (k + 1) * gsize):
            episodes.append(Episode([Sample(batch["ids"][i].tolist(), [0] * p + [1] * c,
                                            [0.0] * p + batch["logp"][i].tolist())], float(batch["rewards"][i])))
        groups.append(Group(f"g{k}", episodes))
    cfg = TrainerConfig(lr=1e-6, envs_per_update=b // gsize, attempts_per_env=gsize, max_seq_len=p + c,
                        temperature=1.0, micro_batch_tokens=b * (p + c), gradient_checkpointing=checkpointing,
                        deepspeed=DeepSpeedConfig(zero_stage=ZERO_STAGE))
    trainer = DPPOTrainer(cfg, model)
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        trainer.update(groups)
        times.append(time.perf_counter() - start)
    return times[1:]


def run_trl(model, tok, batch: dict, shape: dict, steps: int, checkpointing: bool) -> list[float]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    b, p, c = shape["batch"], shape["prompt"], shape["completion"]
    ids = batch["ids"]
    fixed = {"prompt_ids": ids[:, :p], "prompt_mask": ids[:, :p].new_ones(b, p),
             "completion_ids": ids[:, p:], "completion_mask": ids[:, p:].new_ones(b, c),
             "advantages": batch["advantages"], "num_items_in_batch": torch.tensor(b * c)}

    class FixedBatchGRPO(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            return dict(fixed)

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.start)

    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=b, gradient_accumulation_steps=1,
                          num_generations=shape["group"], max_completion_length=c, learning_rate=1e-6, beta=0.0,
                          max_grad_norm=1.0, gradient_checkpointing=checkpointing, use_cpu=True, report_to="none", logging_steps=10**6,
                          save_strategy="no", max_steps=steps + 1, bf16=False, seed=0)
        data = Dataset.from_dict({"prompt": ["x"] * (b * (steps + 2))})
        trainer = FixedBatchGRPO(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                 args=args, train_dataset=data, processing_class=tok, callbacks=[clock])
        trainer.train()
    return clock.times[1:]


def cell(model_name: str, trainer: str, checkpointing: bool, steps: int) -> dict:
    import torch

    torch.manual_seed(0)
    shape = SHAPES[model_name]
    model, tok = load(model_name)
    batch = make_batch(model, shape)
    base = rss_mb()
    reset_peak()
    times = (run_aes if trainer == "aes" else run_trl)(model, tok, batch, shape, steps, checkpointing)
    step = min(times)  # the least disturbed step: other jobs on the machine only add time
    tokens = shape["batch"] * (shape["prompt"] + shape["completion"])
    return {"model": model_name, "trainer": trainer, "checkpointing": checkpointing, **shape, "steps": len(times),
            "step_s": step, "median_step_s": statistics.median(times),
            "tokens_per_s": tokens / step, "loss_tokens_per_s": shape["batch"] * shape["completion"] / step,
            "peak_mb": peak_mb(), "step_mem_mb": peak_mb() - base}


def compare_rollout_engines(max_tokens: int = 64, calls: int = 3) -> dict:
    """Generation speed and mu-vs-pi distance of transformers and llama.cpp on SmolLM2."""
    import torch

    from aes.config import ModelConfig
    from aes.models.hf_chat import TransformersChat, load_gguf_policy
    from aes.models.local import LocalChat, find_smollm2_gguf
    from aes.train.gguf_export import export_gguf

    policy = load_gguf_policy("smollm2-135m-instruct")
    messages = [{"role": "user", "content": "Write one shell command that counts the lines of every .txt file."}]

    def measure(chat) -> dict:
        chat.chat(messages)  # warm-up
        start = time.perf_counter()
        results = [chat.chat(messages) for _ in range(calls)]
        seconds = time.perf_counter() - start
        diffs, tv = [], []
        for r in results:
            pi = policy.sequence_logprobs(r.prompt_token_ids, r.completion_token_ids)
            mu = torch.tensor(r.completion_logprobs)
            diffs.append((pi - mu).abs())
            tv.append((pi.exp() - mu.exp()).abs() > 0.1)
        return {"tokens_per_s": sum(len(r.completion_token_ids) for r in results) / seconds,
                "mean_abs_dlogp": float(torch.cat(diffs).mean()), "tv_over_delta": float(torch.cat(tv).float().mean())}

    def cfg(model: str) -> ModelConfig:
        return ModelConfig(name="bench", backend="local", model=model, max_tokens=max_tokens, seed=0, parallel=1)

    engines = {"transformers fp32 (trained module)": measure(TransformersChat(cfg("smollm2"), policy=policy)) |
               {"sync_s": 0.0}}
    q4 = LocalChat(cfg("smollm2-135m-instruct"))
    engines["llama.cpp Q4_1 (shipped GGUF)"] = measure(q4) | {"sync_s": float("nan")}
    q4.close()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy-f32.gguf"
        start = time.perf_counter()
        export_gguf(policy.model.named_parameters(), policy.model.config, find_smollm2_gguf(), path)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        f32 = LocalChat(cfg(str(path)))
        reload_s = time.perf_counter() - start
        engines["llama.cpp F32 (re-exported)"] = measure(f32) | {"sync_s": export_s + reload_s}
        f32.close()
        size = path.stat().st_size / 2**20
    return {"engines": engines, "export_s": export_s, "export_mb": size, "reload_s": reload_s,
            "max_tokens": max_tokens, "calls": calls}


def subprocess_json(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=REPO, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"], choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    parser.add_argument("--no-rollout", action="store_true", help="skip the rollout-engine comparison")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--checkpointing", choices=["on", "off", "both"], default="both",
                        help="activation (gradient) checkpointing in both trainers; TRL's default is on")
    parser.add_argument("--cell", nargs=3, metavar=("MODEL", "TRAINER", "CKPT"), help=argparse.SUPPRESS)
    parser.add_argument("--rollout-cell", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(cell(args.cell[0], args.cell[1], args.cell[2] == "on", args.steps)))
        return 0
    if args.rollout_cell:
        print(json.dumps(compare_rollout_engines()))
        return 0
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    modes = ["on", "off"] if args.checkpointing == "both" else [args.checkpointing]
    rows = [subprocess_json(["--cell", m, t, ck, "--steps", str(args.steps)])
            for m in args.models for ck in modes for t in ("aes", "trl")]
    print(f"\n{'model':8} {'ckpt':4} {'trainer':7} {'batch':>11} {'step s':>7} {'tok/s':>7} {'loss tok/s':>10} "
          f"{'peak MiB':>9} {'step mem':>9}")
    for r in rows:
        shape = f"{r['batch']}x{r['prompt']}+{r['completion']}"
        ck = "on" if r["checkpointing"] else "off"
        print(f"{r['model']:8} {ck:4} {r['trainer']:7} {shape:>11} {r['step_s']:7.3f} {r['tokens_per_s']:7.0f} "
              f"{r['loss_tokens_per_s']:10.0f} {r['peak_mb']:9.0f} {r['step_mem_mb']:9.0f}")
    for m in args.models:
        for ck in modes:
            a, t = (next(r for r in rows if r["model"] == m and r["trainer"] == k and r["checkpointing"] == (ck == "on"))
                    for k in ("aes", "trl"))
            print(f"{m} checkpointing {ck}: aes/TRL throughput {a['tokens_per_s'] / t['tokens_per_s']:.2f}x, "
                  f"peak memory {a['peak_mb'] / t['peak_mb']:.2f}x")
    result = {"train_step": rows}
    if not args.no_rollout:
        engines = subprocess_json(["--rollout-cell"])
        print(f"\n{'rollout engine (SmolLM2, CPU)':34} {'tok/s':>7} {'|dlogp|':>8} {'|pi-mu|>0.1':>11} {'sync s':>7}")
        for name, r in engines["engines"].items():
            print(f"{name:34} {r['tokens_per_s']:7.1f} {r['mean_abs_dlogp']:8.4f} {r['tv_over_delta']:11.3f} "
                  f"{r['sync_s']:7.2f}")
        print(f"re-export to GGUF: {engines['export_s']:.2f} s ({engines['export_mb']:.0f} MiB), "
              f"engine reload: {engines['reload_s']:.2f} s")
        result["rollout"] = engines
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
