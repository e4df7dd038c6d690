"""Training sequences from stored trajectories: the exact generated token ids, nothing re-rendered.

An ATIF trajectory (``aes/agents/trajectory.py``) holds one agent step per model call with
``metrics.prompt_token_ids`` (the whole history the engine consumed), ``completion_token_ids``
and ``logprobs`` (mu, as the rollout engine reported them); the episode reward is
``extra.reward``.

Multi-turn rule: *pack while prefix-consistent, else split per turn.* Turn k+1 joins the
sequence of turn k when its prompt starts with exactly the ids of that sequence
(``prompt_{k+1}[:n] == prompt_k + completion_k``): the sequence becomes
``prompt_{k+1} + completion_{k+1}`` with the loss on both completions and the tool output /
chat-template tokens in between masked out. Under causal attention each completion token
then sees exactly the context it was sampled with, so the gradient equals per-turn training
while the shared history is computed once instead of once per turn (O(T) instead of O(T^2)
tokens). When a chat template re-renders history differently (e.g. drops reasoning), the
ids are not a prefix and the turn starts a new sequence from its own prompt: still exact,
only slower. No text is ever re-tokenized.

Truncation rule (``max_seq_len``): a turn never joins a sequence it would push past the
limit; it starts a new one. A single call longer than the limit keeps its first
``max_seq_len`` tokens (the context of every kept token is intact; left truncation would
change the context and with it pi) and the completion tokens cut off are not trained; a
call whose prompt alone fills the limit contributes nothing. Both are counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aes.rewards import training_reward

SOLVER, PROPOSER = "solver", "proposer"


class TrajectoryError(ValueError):
    """A trajectory cannot be trained on; the message says which file and step and what is missing."""


@dataclass
class Sample:
    """One training sequence: token ids, which of them the policy generated, and mu for those."""

    input_ids: list[int]
    loss_mask: list[int]
    """1 on policy-generated tokens, 0 on prompt, tool output and template tokens."""
    rollout_logprobs: list[float]
    """The rollout engine's log-prob of each token (0.0 where loss_mask is 0)."""
    advantage: float = 0.0

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask)


@dataclass
class Episode:
    """One trajectory: its training sequences and its reward."""

    samples: list[Sample]
    reward: float
    source: str = ""
    """Where it came from (a trajectory path), for error messages."""
    truncated_tokens: int = 0
    """Generated tokens dropped by the truncation rule."""


@dataclass
class Group:
    """Attempts that share a baseline: one env's solver attempts or one assignment's proposer episodes."""

    key: str
    episodes: list[Episode]
    role: str = SOLVER
    """solver or proposer (each group is centred on its own mean either way)."""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def rewards(self) -> list[float]:
        return [e.reward for e in self.episodes]


@dataclass
class Turn:
    """One model call: the exact prompt ids, the generated ids and their rollout log-probs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]


def pack_turns(turns: list[Turn], max_seq_len: int) -> tuple[list[Sample], int]:
    """Apply the multi-turn and truncation rules; returns the samples and the truncated-token count."""
    samples: list[Sample] = []
    current: Sample | None = None
    truncated = 0
    for turn in turns:
        full = len(turn.prompt_ids) + len(turn.completion_ids)
        n = len(current) if current is not None else 0
        if current is not None and full <= max_seq_len and turn.prompt_ids[:n] == current.input_ids:
            gap = turn.prompt_ids[n:]
            current.input_ids += gap + turn.completion_ids
            current.loss_mask += [0] * len(gap) + [1] * len(turn.completion_ids)
            current.rollout_logprobs += [0.0] * len(gap) + list(turn.logprobs)
            continue
        if current is not None:
            samples.append(current)
        current = Sample(list(turn.prompt_ids) + list(turn.completion_ids),
                         [0] * len(turn.prompt_ids) + [1] * len(turn.completion_ids),
                         [0.0] * len(turn.prompt_ids) + list(turn.logprobs))
        if full > max_seq_len:
            truncated += sum(current.loss_mask[max_seq_len:])
            current = Sample(current.input_ids[:max_seq_len], current.loss_mask[:max_seq_len],
                             current.rollout_logprobs[:max_seq_len])
            samples.append(current)
            current = None  # a cut sequence is never extended
    if current is not None:
        samples.append(current)
    return [s for s in samples if s.loss_tokens > 0], truncated


def trajectory_turns(trajectory: dict[str, Any], source: str = "") -> list[Turn]:
    """The model calls of an ATIF trajectory, checked for token ids and log-probs."""
    turns = []
    for step in trajectory.get("steps", []):
        if step.get("source") != "agent":
            continue
        metrics = step.get("metrics") or {}
        prompt, completion = metrics.get("prompt_token_ids"), metrics.get("completion_token_ids")
        logprobs = metrics.get("logprobs")
        where = f"{source or 'trajectory'} step {step.get('step_id')}"
        if prompt is None or completion is None or logprobs is None:
            raise TrajectoryError(
                f"{where} has no token ids/log-probs: roll out with solver.logprobs=true on a backend that "
                "reports them (tiny, transformers, local, or vLLM via openai_compatible)")
        if len(logprobs) != len(completion) or any(lp is None for lp in logprobs):
            raise TrajectoryError(f"{where}: {len(logprobs)} log-probs for {len(completion)} generated tokens")
        turns.append(Turn(list(prompt), list(completion), [float(lp) for lp in logprobs]))
    return turns


def episode_from_trajectory(trajectory: dict[str, Any], max_seq_len: int, source: str = "",
                            reward: float | None = None) -> Episode | None:
    """The episode of one trajectory; None when it has no reward (an error of the sandbox, not of
    the agent: an attempt that broke its verifier is recorded with 0, see aes.rollout.runner).
    Its reward is the one the advantage is computed from: the shaped reward where the attempt has
    one (human-in-the-loop, ``hil.shaped_reward_weight``), else the task reward."""
    reward = reward if reward is not None else training_reward(trajectory.get("extra") or {})
    if reward is None:
        return None
    samples, truncated = pack_turns(trajectory_turns(trajectory, source), max_seq_len)
    return Episode(samples, float(reward), source, truncated)


def load_groups(root: str | Path, max_seq_len: int, solver: str | None = None,
                role: str = SOLVER) -> Iterator[Group]:
    """Groups from ``<root>/<env_id>/<solver>/<attempt>.json`` (the rollout runner's layout).

    One group per (env, solver) directory; attempts without a reward are left out (see
    :func:`episode_from_trajectory`). ``root`` is the ``trajectories/`` directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no trajectories directory at {root}; run rollouts first (mode=rollout)")
    for env_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for solver_dir in sorted(p for p in env_dir.iterdir() if p.is_dir()):
            if solver is not None and solver_dir.name != solver:
                continue
            episodes = []
            for path in sorted(solver_dir.glob("[!.]*.json"), key=lambda p: (len(p.stem), p.stem)):
                data = json.loads(path.read_text())
                episode = episode_from_trajectory(data, max_seq_len, str(path))
                if episode is not None:
                    episodes.append(episode)
            if episodes:
                yield Group(f"{env_dir.name}/{solver_dir.name}", episodes, role,
                            {"env_id": env_dir.name, "solver": solver_dir.name})


def groups_of_files(files: dict[str, list[str]], max_seq_len: int, role: str = SOLVER) -> Iterator[Group]:
    """One group per key (an env id) from its trajectory files; attempts without a reward are
    left out (see :func:`episode_from_trajectory`)."""
    for key, paths in files.items():
        episodes = []
        for path in paths:
            episode = episode_from_trajectory(json.loads(Path(path).read_text()), max_seq_len, str(path))
            if episode is not None:
                episodes.append(episode)
        if episodes:
            yield Group(key, episodes, role, {"env_id": key})
