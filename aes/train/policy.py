"""The trainable solver of a flywheel run: its rollout engine, its policy and its DPPO trainer.

``solver.backend`` decides the rollout engine and how new weights reach it:

* ``tiny`` - the tiny transformers model in this process; rollouts use the trained module itself.
* ``local`` - SmolLM2 sampled by llama.cpp from the embedded GGUF; DPPO trains a dequantised
  transformers copy, and after every update the weights are re-exported as an F32 GGUF that
  the engine reloads (llama.cpp samples 2x faster than transformers here and batches
  attempts; the re-exported engine's log-probs are within ~0.002 nats of the trainer's).
  Until the first update the shipped Q4_1 file serves the rollouts: it samples about twice
  as fast as the F32 export, and its log-probs differ from the trainer's by ~0.07 nats per
  token, well inside DPPO's trust region (0.07% of tokens masked in the embedded run).
* ``openai_compatible`` - a vLLM server; the policy is the Hugging Face model ``solver.model``
  and weights are pushed to the server after every update (GPU clusters).

Hosted APIs (``anthropic``, ``openai``) cannot be trained and are refused with a reason.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from aes.config import AesConfig
from aes.models import ChatModel, RunBudget

log = logging.getLogger(__name__)


class _Lazy:
    """A policy loaded only when training starts (loading SmolLM2 takes ~30 s and ~1.5 GiB)."""

    def __init__(self, load):
        self.load = load


class TrainableSolver:
    """A chat model whose weights DPPO updates (the trainer is built on first use)."""

    def __init__(self, cfg: AesConfig, chat: ChatModel, policy: Any, sync: Any = None):
        self.cfg, self.chat, self.policy, self.sync = cfg, chat, policy, sync
        self._trainer = None
        self._building: Future | None = None

    def _build(self):
        from aes.train.trainer import DPPOTrainer

        if isinstance(self.policy, _Lazy):
            self.policy = self.policy.load()
        return DPPOTrainer(self.cfg.trainer, self.policy, self.sync)

    def prepare(self) -> None:
        """Start building the trainer (loading the policy, starting its engine) in the background,
        so that it is ready when the rollouts running meanwhile are done; an error it raises
        surfaces where the trainer is first used. The thread is a daemon: a run stopped by Ctrl-C
        exits without waiting for a trainer it will not use (it writes nothing a resume needs)."""
        if self._trainer is None and self._building is None:
            building: Future = Future()

            def build() -> None:
                try:
                    building.set_result(self._build())
                except BaseException as exc:  # noqa: BLE001 - raised where the trainer is first used
                    building.set_exception(exc)

            self._building = building
            threading.Thread(target=build, name="aes-trainer-build", daemon=True).start()

    @property
    def trainer(self):
        if self._trainer is None:
            if self._building is not None:
                building, self._building = self._building, None
                self._trainer = building.result()
            else:
                self._trainer = self._build()
        return self._trainer

    def groups_from(self, trajectories: Path) -> list:
        from aes.train.episodes import load_groups

        return list(load_groups(trajectories, self.cfg.trainer.max_seq_len, solver=self.chat.config.name))

    def groups_of(self, rollouts: dict) -> list:
        """One group per env of a rollout batch (``RolloutRunner.run``'s result)."""
        from aes.train.episodes import groups_of_files

        files = {env_id: [r.path for r in sorted(env.records, key=lambda r: r.attempt) if r.path]
                 for env_id, env in rollouts.items()}
        return list(groups_of_files(files, self.cfg.trainer.max_seq_len))

    def proposer_groups(self, trajectories: Path, round: int) -> list:
        """A generation's proposer episodes, one group per assignment (all its samples), each
        rewarded with r_P of the env it finally submitted; flat groups are dropped."""
        from aes.train.advantages import proposer_reward
        from aes.train.episodes import PROPOSER, Group, TrajectoryError, episode_from_trajectory

        groups: dict[str, list] = {}
        for path in sorted(trajectories.glob("*.json")):
            data = json.loads(path.read_text())
            extra = data.get("extra") or {}
            assignment = extra.get("assignment") or {}
            if assignment.get("round") != round:
                continue
            reward = proposer_reward(extra.get("outcome", "broken"), self.cfg.trainer.proposer_partial_reward)
            try:
                episode = episode_from_trajectory(data, self.cfg.trainer.max_seq_len, str(path), reward=reward)
            except TrajectoryError as exc:
                log.warning("proposer episode not trainable: %s", exc)
                continue
            if episode is not None:
                groups.setdefault(assignment.get("group") or assignment.get("assignment_id", ""), []).append(episode)
        return [Group(key, eps, PROPOSER) for key, eps in groups.items() if len({e.reward for e in eps}) > 1]

    def update(self, groups: list, collected: int) -> dict:
        from aes.train.advantages import Batch

        return self.trainer.update(Batch(groups, collected=collected, target=len(groups)))

    def save(self, directory: Path) -> None:
        self.trainer.save(directory)

    def restore(self, directory: Path) -> None:
        if directory.exists():
            step = self.trainer.load(directory)
            log.info("resumed the solver from %s (update %s)", directory, step)

    def close(self) -> None:
        if self._building is not None:  # a build still running: let it finish, then close what it built
            try:
                self._trainer = self._building.result()
            except Exception as exc:  # noqa: BLE001 - closing: the run already ended
                log.warning("the trainer being built when the run ended failed: %s", exc)
            self._building = None
        if self._trainer is not None:
            self._trainer.close()
        self.chat.close()

