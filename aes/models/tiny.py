"""A tiny random transformers model for tests and CPU smoke runs (``backend: tiny``).

``conf/solver/tiny.yaml`` names a preset (``tiny-qwen2`` or ``tiny-llama``): a ~2-layer,
64-wide causal LM initialised from a fixed seed (``cfg.seed`` or 0), with a byte-level BPE
tokenizer trained in process on a small built-in corpus (shell commands, English words and
the ChatML tokens ``<|im_start|>`` / ``<|im_end|>``). Nothing is downloaded.

The :class:`~aes.models.hf_chat.Policy` is cached per (preset, seed) in the process and is
reachable as ``TinyChat(...).policy``: a trainer that updates ``policy.model`` (holding
``policy.lock``) changes what the next ``chat`` samples. Generation and its exact ids and
log-probs come from :class:`~aes.models.hf_chat.TransformersChat`.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from aes.config import ModelConfig
from aes.models.base import ModelError, RunBudget
from aes.models.hf_chat import Policy, TransformersChat

TinyPolicy = Policy

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
VOCAB_SIZE = 1024

PRESETS: dict[str, dict[str, Any]] = {
    "tiny-qwen2": {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2},
    "tiny-llama": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 256,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2},
    # the same width with heads of 32 dimensions: the smallest vLLM's CPU attention runs
    "tiny-qwen2-vllm": {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256,
                        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1},
    "tiny-qwen3-vllm": {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 256, "head_dim": 32,
                        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1},
}

_COMMANDS = """\
ls -la /app
cd /app && ls
cat /app/README.md
pwd
echo hello > /app/answer.txt
grep -rn "error" /var/log/app.log
find . -name "*.py" -type f
python3 -m pytest -q tests/
python3 solve.py --input data.csv --output result.json
pip install --no-cache-dir requests
sed -i 's/foo/bar/g' config.ini
awk '{print $1}' access.log | sort | uniq -c | sort -rn | head
head -n 20 data.csv
tail -f /var/log/syslog
wc -l *.txt
mkdir -p /app/output && cp input.txt /app/output/
mv old_name.txt new_name.txt
rm -rf build/
chmod +x run.sh && ./run.sh
tar -czf backup.tar.gz /app/data
curl -s http://localhost:8000/health
git status && git diff
git log --oneline | head -5
make && make test
gcc -O2 -o main main.c
sqlite3 db.sqlite "SELECT name, total FROM sales ORDER BY total DESC;"
jq '.items[] | .name' data.json
export PATH=$PATH:/usr/local/bin
apt-get update && apt-get install -y curl
du -sh /app/*
ps aux | grep python
kill -9 1234
diff -u expected.txt actual.txt
xargs -n 1 echo < list.txt
for f in *.log; do echo "$f"; done
if [ -f /app/answer.txt ]; then cat /app/answer.txt; fi
"""

_PYTHON = """\
import os
import sys
import json
def main():
    with open("data.csv") as f:
        rows = [line.strip().split(",") for line in f]
    total = sum(int(r[1]) for r in rows[1:])
    print(total)
if __name__ == "__main__":
    main()
for i in range(10):
    print(i, i * i)
"""

_ENGLISH = """\
You are a helpful assistant that solves tasks in a Linux terminal.
Run one shell command at a time and read its output before the next step.
The task is done when the tests pass. Write the answer to the file and check it.
Please list the files in the current directory and show the contents of the readme.
The command failed with an error: no such file or directory. Let me fix the path.
I will install the missing package, then run the script again.
The output looks correct, so the task is complete.
What is the total of the sales column? The answer is forty two.
the of and to a in is you that it for on with as are this be at or from by not
file files directory directories command commands output input error errors test tests
read write run check fix find show list open close create delete update install build
number string value values line lines data result results answer task tasks step steps
first next last then when where which while because before after again only also
system user assistant tool bash shell terminal script python program function class module
one two three four five six seven eight nine ten hundred thousand zero true false none
Good morning. Thank you for the help. Here is the plan: inspect, edit, run, verify, submit.
The verifier checks the reward file. A reward of one means the task passed.
"""


def _corpus() -> list[str]:
    lines = [line for block in (_COMMANDS, _PYTHON, _ENGLISH) for line in block.splitlines() if line.strip()]
    system = "<|im_start|>system\nYou are a helpful assistant that solves tasks in a Linux terminal.<|im_end|>\n"
    chat = [f"{system}<|im_start|>user\n{u}<|im_end|>\n<|im_start|>assistant\n```bash\n{c}\n```<|im_end|>\n"
            for u, c in zip(_ENGLISH.splitlines(), _COMMANDS.splitlines())]
    return lines + chat


def build_tokenizer(vocab_size: int = VOCAB_SIZE) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on the built-in corpus (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=CHAT_TEMPLATE)


def build_model(preset: str, vocab_size: int, *, seed: int, eos_token_id: int, pad_token_id: int,
                max_positions: int = 4096) -> Any:
    """A randomly initialised causal LM of ``preset``, the same for the same seed."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(PRESETS[preset])
    config = AutoConfig.for_model(spec.pop("model_type"), vocab_size=vocab_size, max_position_embeddings=max_positions,
                                  tie_word_embeddings=True, attention_dropout=0.0, bos_token_id=None,
                                  eos_token_id=eos_token_id, pad_token_id=pad_token_id, **spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = pad_token_id
    model.eval()
    return model


_POLICIES: dict[tuple[str, int], Policy] = {}
_POLICIES_LOCK = threading.Lock()


def tiny_policy(preset: str = "tiny-qwen2", seed: int = 0) -> Policy:
    """The process's tiny policy for (preset, seed), built on first use (~0.1 s)."""
    if preset not in PRESETS:
        raise ModelError(f"unknown tiny model preset {preset!r}; choose one of {', '.join(PRESETS)}")
    key = (preset, int(seed))
    with _POLICIES_LOCK:
        policy = _POLICIES.get(key)
        if policy is None:
            tokenizer = build_tokenizer()
            model = build_model(preset, len(tokenizer), seed=int(seed),
                                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
            policy = _POLICIES[key] = Policy(model=model, tokenizer=tokenizer, name=f"{preset}@{seed}")
        return policy


class TinyChat(TransformersChat):
    """A tiny random model in this process; ``self.policy`` is shared per (preset, seed)."""

    def __init__(self, cfg: ModelConfig, budget: RunBudget | None = None):
        seed = cfg.seed if cfg.seed is not None else 0
        super().__init__(cfg, budget, tiny_policy(cfg.model, seed))
