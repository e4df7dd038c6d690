"""An in-process stand-in for the Docker sandbox, for a flywheel that runs in seconds.

``sandbox.backend=simulated`` (``experiment=simulated``): nothing is built or run. A task's
difficulty ``d`` is its ``[metadata] sim_difficulty`` (else its ``difficulty`` label: starter
-1, easy 0, medium 1, hard 2); a solver of skill ``s`` (:class:`aes.models.scripted.ScriptedModel`)
passes each of the task's four tests with probability ``1 / (1 + exp(-2 (s - d)))``, so rewards
are fractional as the paper's are. The reference solution earns 1 unless the task says
``sim_broken = true``; doing nothing earns 0. Draws are seeded by the run's seed, the task and the
attempt, so a run is reproducible. This exercises the loop's dynamics — fresh rollouts, the
calibration band, retirement, self-play — never a verifier: the security and fidelity of
rewards are the Docker sandbox's job.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading

from aes.config import SandboxConfig
from aes.sandbox.images import BuildResult
from aes.sandbox.trial import AgentRun, NopAgent, OracleAgent, Outcome, TrialResult

LABELS = {"starter": -1.0, "easy": 0.0, "medium": 1.0, "hard": 2.0}
TESTS = 4


def difficulty(task) -> float:
    meta = task.spec.metadata or {}
    if "sim_difficulty" in meta:
        return float(meta["sim_difficulty"])
    return LABELS.get(str(meta.get("difficulty", "medium")).lower(), 1.0)


def pass_probability(skill: float, level: float) -> float:
    return 1.0 / (1.0 + math.exp(-2.0 * (skill - level)))


class SimulatedSandbox:
    """Builds nothing: every task's "image" is its name."""

    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg

    def build(self, task) -> BuildResult:
        return BuildResult(image=f"simulated:{task.name}", cached=True)

    def drain(self, timeout: float = 0.0) -> None:
        pass


class SimulatedTrials:
    """A :class:`~aes.sandbox.TrialRunner` with the same interface, computing rewards in process."""

    def __init__(self, cfg: SandboxConfig, seed: int = 0):
        self.cfg = cfg
        self.sandbox = SimulatedSandbox(cfg)
        self.seed = seed
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def _rng(self, task) -> random.Random:
        key = task.env_id or task.name
        with self._lock:
            n = self._counts[key] = self._counts.get(key, 0) + 1
        digest = hashlib.sha256(f"{self.seed}|{key}|{n}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def run(self, task, agent, image: str | None = None, logs_to=None) -> TrialResult:
        result = TrialResult(task=task.name, agent=agent.name, outcome=Outcome.OK, image=image)
        broken = bool((task.spec.metadata or {}).get("sim_broken", False))
        if isinstance(agent, OracleAgent):
            reward = 0.0 if broken else 1.0
        elif isinstance(agent, NopAgent):
            reward = 0.0
        else:
            skill = float(getattr(getattr(agent, "model", None), "skill", 0.0))
            p = pass_probability(skill, difficulty(task))
            rng = self._rng(task)
            reward = sum(rng.random() < p for _ in range(TESTS)) / TESTS
            run = AgentRun(exit_code=0, info={"end_reason": "done", "trajectory": {
                "schema_version": "ATIF-v1.8", "agent": {"name": agent.name}, "steps": [],
                "extra": {"simulated": True, "skill": skill, "pass_probability": round(p, 4)}}})
            result.agent_info = run.info
        result.reward, result.rewards = reward, {"reward": reward}
        result.verifier_output = f"{int(reward * TESTS)} of {TESTS} tests passed (simulated)"
        return result
