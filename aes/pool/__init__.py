"""The training pool: SQLite state plus content-addressed task files, crash-safe."""

from aes.pool.store import STATUSES, AssignmentLog, EnvRecord, PoolError, PoolStore, content_hash

__all__ = ["STATUSES", "AssignmentLog", "EnvRecord", "PoolError", "PoolStore", "content_hash"]
