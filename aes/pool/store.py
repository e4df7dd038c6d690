"""The environment pool: SQLite (WAL) for state, a content-addressed directory for task files.

Capacity: with ``capacity`` set (the flywheel sets ``flywheel.pool_size``), an env is admitted only
while the pool holds fewer admitted envs; the count and the change are one transaction, so
episodes admitting at once never overshoot. An env in the band that finds the pool full stays
``calibrated`` — waiting for room — until :meth:`PoolStore.admit_waiting` lets it in.

Crash safety: a task's files are written to ``tasks/<hash>/`` through a temporary
directory and an atomic rename *before* its row is committed, so a committed row
always points at complete files, and every state change is one SQLite transaction
(``synchronous=FULL``). A kill at any point leaves either the old or the new state.
The content hash covers every file of the task, so the same content is stored once
and can never be admitted twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from aes.tasks import Task, load_task

log = logging.getLogger(__name__)

STATUSES = ("proposed", "invalid", "valid", "calibrated", "admitted", "retired")
# Where a status may go next; admitted envs only ever become retired.
TRANSITIONS = {
    "proposed": {"invalid", "valid"},
    "invalid": set(),
    "valid": {"calibrated", "invalid"},
    "calibrated": {"admitted", "valid"},
    "admitted": {"retired"},
    "retired": {"admitted"},
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS envs (
    env_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    parent_id TEXT,
    assignment_id TEXT,
    round INTEGER NOT NULL DEFAULT 0,
    mean_reward REAL,
    std_reward REAL,
    cost_usd REAL NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    revisions INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL DEFAULT 'proposer',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS envs_status ON envs(status);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    env_id TEXT NOT NULL REFERENCES envs(env_id),
    stage TEXT NOT NULL,
    passed INTEGER NOT NULL,
    reasons TEXT NOT NULL,
    details TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS assignments (
    assignment_id TEXT PRIMARY KEY,
    round INTEGER NOT NULL,
    parent_id TEXT,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    result_env_id TEXT,
    outcome TEXT,
    cost_usd REAL NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    result TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_IGNORED = {"__pycache__", ".pytest_cache", ".DS_Store"}


class PoolError(RuntimeError):
    """An illegal pool operation (unknown env, forbidden status change)."""


def content_hash(task_dir: Path) -> str:
    """sha256 over every file's relative path, executable bit, and bytes (symlinks by target)."""
    digest = hashlib.sha256(b"aes-task-v1\0")
    for path in sorted(task_dir.rglob("*")):
        rel = path.relative_to(task_dir)
        if any(part in _IGNORED for part in rel.parts) or path.is_dir() and not path.is_symlink():
            continue
        if path.is_symlink():  # names as bytes: a draft's file names need not be UTF-8
            digest.update(os.fsencode(f"L\0{rel.as_posix()}\0{os.readlink(path)}\0"))
            continue
        executable = os.access(path, os.X_OK)
        digest.update(os.fsencode(f"F\0{rel.as_posix()}\0{int(executable)}\0"))
        digest.update(_file_digest(path))
    return digest.hexdigest()


def _ignored(directory: str, names: list[str]) -> set[str]:
    """What the pool does not copy: caches, and pipes, sockets and devices (a proposer's container may
    leave them in a draft; copying one would block or fail, and no task needs one)."""
    skipped = set(names) & _IGNORED
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            skipped.add(name)
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.add(name)
    return skipped


def _file_digest(path: Path) -> bytes:
    """sha256 of a file's bytes, read in chunks (a draft's file may be huge or sparse); a FIFO or
    device (which a proposer's container could leave in its draft) is named, never read."""
    mode = os.lstat(path).st_mode
    if not stat.S_ISREG(mode):  # not even opened: opening a device can have effects
        return hashlib.sha256(f"special\0{stat.S_IFMT(mode):o}".encode()).digest()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", closefd=True) as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return hashlib.sha256(f"special\0{stat.S_IFMT(info.st_mode):o}".encode()).digest()
        sha, left = hashlib.sha256(), info.st_size  # a file still growing is read up to its size at open
        while left > 0 and (chunk := fh.read(min(1 << 20, left))):
            sha.update(chunk)
            left -= len(chunk)
    return sha.digest()


@dataclass
class EnvRecord:
    env_id: str
    content_hash: str
    name: str
    status: str
    parent_id: str | None
    assignment_id: str | None
    round: int
    mean_reward: float | None
    std_reward: float | None
    cost_usd: float
    tokens: int
    revisions: int
    source: str
    created_at: float
    updated_at: float
    path: Path

    def load(self) -> Task:
        task = load_task(self.path)
        task.env_id = self.env_id
        return task


class PoolStore:
    """The pool of a run; safe to use from several threads of one process."""

    def __init__(self, root: str | Path, capacity: int | None = None):
        self.root = Path(root)
        self.tasks_dir = self.root / "tasks"
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        self.capacity = capacity
        """Most admitted envs at once (None: no limit); see the module doc."""
        self._local = threading.local()
        self._write_lock = threading.Lock()
        with self._write_lock:
            db = self._db()
            db.executescript(SCHEMA)
            columns = {r["name"] for r in db.execute("PRAGMA table_info(assignments)").fetchall()}
            if "result" not in columns:  # a pool written by an older aes
                db.execute("ALTER TABLE assignments ADD COLUMN result TEXT")

    # -- connections -------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.root / "pool.sqlite", timeout=60, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        with self._write_lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- envs --------------------------------------------------------------------------
    def _store_files(self, task_dir: Path, digest: str) -> Path:
        final = self.tasks_dir / digest[:2] / digest
        if final.exists():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{digest[:12]}-{uuid.uuid4().hex[:8]}"
        shutil.copytree(task_dir, tmp, symlinks=True, ignore=_ignored)
        _fsync_tree(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another writer won the race with identical content
            shutil.rmtree(tmp, ignore_errors=True)
        return final

    def add(self, task_dir: str | Path, *, name: str, status: str = "proposed", parent_id: str | None = None,
            assignment_id: str | None = None, round: int = 0, source: str = "proposer",
            cost_usd: float = 0.0, tokens: int = 0, revisions: int = 0) -> tuple[EnvRecord, bool]:
        """Store a task; returns (record, created). Identical content returns the existing env."""
        if status not in STATUSES:
            raise PoolError(f"unknown status {status!r}")
        task_dir = Path(task_dir)
        digest = content_hash(task_dir)
        existing = self.by_hash(digest)
        if existing:
            return existing, False
        self._store_files(task_dir, digest)
        slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower()).strip("-.")[:48]
        env_id = f"{slug or 'env'}-{digest[:8]}"
        now = time.time()
        with self._tx() as db:
            row = db.execute("SELECT env_id FROM envs WHERE content_hash = ?", (digest,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO envs (env_id, content_hash, name, status, parent_id, assignment_id, round,"
                    " cost_usd, tokens, revisions, source, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (env_id, digest, name, status, parent_id, assignment_id, round, cost_usd, tokens,
                     revisions, source, now, now))
        record = self.by_hash(digest)
        assert record is not None
        return record, row is None

    def _record(self, row: sqlite3.Row | None) -> EnvRecord | None:
        if row is None:
            return None
        data = dict(row)
        data["path"] = self.tasks_dir / data["content_hash"][:2] / data["content_hash"]
        return EnvRecord(**data)

    def get(self, env_id: str) -> EnvRecord:
        record = self._record(self._db().execute("SELECT * FROM envs WHERE env_id = ?", (env_id,)).fetchone())
        if record is None:
            raise PoolError(f"no env {env_id!r} in the pool at {self.root}")
        return record

    def by_hash(self, digest: str) -> EnvRecord | None:
        return self._record(self._db().execute("SELECT * FROM envs WHERE content_hash = ?", (digest,)).fetchone())

    def envs(self, status: str | None = None) -> list[EnvRecord]:
        query, args = "SELECT * FROM envs", ()
        if status:
            query, args = query + " WHERE status = ?", (status,)
        rows = self._db().execute(query + " ORDER BY created_at, env_id", args).fetchall()
        return [r for r in (self._record(row) for row in rows) if r is not None]

    def set_status(self, env_id: str, status: str, *, mean_reward: float | None = None,
                   std_reward: float | None = None) -> str:
        """Move the env to ``status``; returns the status it has now: ``calibrated`` instead of
        ``admitted`` when the pool is at its ``capacity`` (it waits for room)."""
        with self._tx() as db:
            row = db.execute("SELECT status FROM envs WHERE env_id = ?", (env_id,)).fetchone()
            if row is None:
                raise PoolError(f"no env {env_id!r}")
            if status != row["status"] and status not in TRANSITIONS[row["status"]]:
                raise PoolError(f"env {env_id}: {row['status']} -> {status} is not allowed")
            if status == "admitted" and row["status"] != "admitted" and self._full(db):
                status = "calibrated" if row["status"] in ("calibrated", "valid") else row["status"]
                log.info("%s: the pool is full (%d admitted envs, its capacity): it stays %s, waiting for room",
                         env_id, self.capacity, status)
            db.execute(
                "UPDATE envs SET status = ?, mean_reward = COALESCE(?, mean_reward),"
                " std_reward = COALESCE(?, std_reward), updated_at = ? WHERE env_id = ?",
                (status, mean_reward, std_reward, time.time(), env_id))
        return status

    def _full(self, db: sqlite3.Connection) -> bool:
        if self.capacity is None:
            return False
        return db.execute("SELECT COUNT(*) FROM envs WHERE status = 'admitted'").fetchone()[0] >= self.capacity

    def admit_waiting(self) -> list[str]:
        """Admit envs waiting for room (``calibrated``: in the band when the pool was full), the most
        recently calibrated first, while the pool has room; their ids."""
        admitted = []
        for env in sorted(self.envs("calibrated"), key=lambda e: -e.updated_at):
            if self.set_status(env.env_id, "admitted") != "admitted":
                break
            admitted.append(env.env_id)
        return admitted

    def ever_admitted(self) -> int:
        """Envs from the proposer that have entered the pool so far (admitted now, or retired since)."""
        return self._db().execute("SELECT COUNT(*) FROM envs WHERE source != 'seed' AND status IN "
                                  "('admitted', 'retired')").fetchone()[0]

    def add_verdict(self, env_id: str, stage: str, passed: bool, reasons: list[str],
                    details: dict[str, Any] | None = None) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO verdicts (env_id, stage, passed, reasons, details, created_at)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (env_id, stage, int(passed), json.dumps(reasons), json.dumps(details or {}), time.time()))

    def verdicts(self, env_id: str) -> list[dict[str, Any]]:
        rows = self._db().execute("SELECT * FROM verdicts WHERE env_id = ? ORDER BY id", (env_id,)).fetchall()
        return [{**dict(r), "reasons": json.loads(r["reasons"]), "details": json.loads(r["details"] or "{}")}
                for r in rows]

    def counts(self) -> dict[str, int]:
        rows = self._db().execute("SELECT status, COUNT(*) AS n FROM envs GROUP BY status").fetchall()
        return {r["status"]: r["n"] for r in rows}

    # -- run metadata ------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row["value"]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       (key, json.dumps(value)))

    def check(self) -> list[str]:
        """Consistency problems (empty list when sound): integrity, missing files, bad statuses."""
        problems = [r[0] for r in self._db().execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
        for record in self.envs():
            if record.status not in STATUSES:
                problems.append(f"{record.env_id}: unknown status {record.status}")
            if not (record.path / "task.toml").exists():
                problems.append(f"{record.env_id}: files missing at {record.path}")
        return problems


def _fsync_tree(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class AssignmentLog:
    """Assignments given to the proposer and how they ended (rows of the pool database)."""

    def __init__(self, store: PoolStore):
        self.store = store

    def open(self, round: int, parent_id: str | None, spec: dict[str, Any]) -> str:
        assignment_id = f"a{round:03d}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        with self.store._tx() as db:
            db.execute("INSERT INTO assignments (assignment_id, round, parent_id, spec, status, created_at, updated_at)"
                       " VALUES (?, ?, ?, ?, 'open', ?, ?)",
                       (assignment_id, round, parent_id, json.dumps(spec), now, now))
        return assignment_id

    def close(self, assignment_id: str, outcome: str, env_id: str | None, cost_usd: float, tokens: int) -> None:
        with self.store._tx() as db:
            db.execute("UPDATE assignments SET status = 'closed', outcome = ?, result_env_id = ?, cost_usd = ?,"
                       " tokens = ?, updated_at = ? WHERE assignment_id = ?",
                       (outcome, env_id, cost_usd, tokens, time.time(), assignment_id))

    def record_result(self, assignment_id: str, result: dict[str, Any]) -> None:
        """Keep what the episode of a closed assignment produced (its Table 2 columns, feedback, ...),
        so that a resumed run counts it in its round."""
        with self.store._tx() as db:
            db.execute("UPDATE assignments SET result = ?, updated_at = ? WHERE assignment_id = ?",
                       (json.dumps(result, default=str), time.time(), assignment_id))

    def rows(self, round: int | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM assignments", ()
        if round is not None:
            query, args = query + " WHERE round = ?", (round,)
        rows = self.store._db().execute(query + " ORDER BY created_at", args).fetchall()
        return [{**dict(r), "spec": json.loads(r["spec"]), "result": json.loads(r["result"]) if r["result"] else None}
                for r in rows]
