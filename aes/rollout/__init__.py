"""Solver rollouts: concurrent attempts on tasks, trajectory files and their index."""

from aes.rollout.index import AttemptRecord, IndexRow, failure_signature, latest_rows, read_index
from aes.rollout.runner import EnvRollouts, RolloutRunner, env_id_of

__all__ = ["AttemptRecord", "EnvRollouts", "IndexRow", "RolloutRunner", "env_id_of",
           "failure_signature", "latest_rows", "read_index"]
