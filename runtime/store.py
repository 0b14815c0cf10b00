"""Durable job state in SQLite: a restarted scheduler loses nothing that a job had checkpointed."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from .validate import MAX_JOB_ID, InvalidInput

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    job_type TEXT NOT NULL,
    scale_factor INTEGER NOT NULL,
    total_steps INTEGER NOT NULL,
    priority_weight REAL NOT NULL,
    command TEXT NOT NULL,
    state TEXT NOT NULL,              -- queued, running, completed, failed
    steps_done INTEGER NOT NULL DEFAULT 0,       -- durable: checkpointed progress
    attempts INTEGER NOT NULL DEFAULT 0,
    submitted_s REAL NOT NULL,        -- wall-clock (epoch) seconds
    finished_s REAL,                  -- wall-clock (epoch) seconds
    log_tail TEXT NOT NULL DEFAULT '',
    entity TEXT NOT NULL DEFAULT '',  -- user/team/vc for hierarchical policies
    adaptation TEXT NOT NULL DEFAULT '',         -- batch-size adaptation: '' (static), accordion, gns
    batch_size INTEGER NOT NULL DEFAULT 0,       -- an adaptive job's current batch size (0: its type's)
    pinned_gpu_types TEXT NOT NULL DEFAULT '',   -- '|'-separated GPU types the job may run on ('': any)
    slo_factor REAL NOT NULL DEFAULT 0,          -- Gavel's SLO x duration_s after submission (0: none)
    duration_s REAL NOT NULL DEFAULT 0,
    attained_s REAL NOT NULL DEFAULT 0,          -- read only: histories before `history` (2026-11-28 servers)
    last_run_s REAL NOT NULL DEFAULT -1,         -- read only, as attained_s
    rates TEXT NOT NULL DEFAULT '',              -- measured rates in use: {"job_type": ..., "rates": {type: steps/s}}
    history TEXT NOT NULL DEFAULT '',            -- the decide stage's history of the job (JSON), for restarts
    argv TEXT NOT NULL DEFAULT ''                -- the command's words (JSON), split once when it was submitted
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
LATER_COLUMNS = (("entity", "TEXT NOT NULL DEFAULT ''"), ("adaptation", "TEXT NOT NULL DEFAULT ''"),
                 ("batch_size", "INTEGER NOT NULL DEFAULT 0"), ("pinned_gpu_types", "TEXT NOT NULL DEFAULT ''"),
                 ("slo_factor", "REAL NOT NULL DEFAULT 0"), ("duration_s", "REAL NOT NULL DEFAULT 0"),
                 ("attained_s", "REAL NOT NULL DEFAULT 0"), ("last_run_s", "REAL NOT NULL DEFAULT -1"),
                 ("rates", "TEXT NOT NULL DEFAULT ''"), ("history", "TEXT NOT NULL DEFAULT ''"),
                 ("argv", "TEXT NOT NULL DEFAULT ''"))


class DuplicateJob(ValueError):
    """A job id that is already stored."""


@dataclass
class JobRow:
    job_id: int
    job_type: str
    scale_factor: int
    total_steps: int
    priority_weight: float
    command: str
    state: str
    steps_done: int
    attempts: int
    submitted_s: float
    finished_s: float | None
    log_tail: str
    entity: str = ""
    adaptation: str = ""
    batch_size: int = 0              # total_steps and steps_done are counted at this batch size (0: the type's)
    pinned_gpu_types: str = ""
    slo_factor: float = 0.0          # 0: no SLO
    duration_s: float = 0.0
    attained_s: float = 0.0          # an ordering's history as servers of 2026-11-28 stored it: seconds run and
    last_run_s: float = -1.0         # the end of its last run (-1: never); read when `history` is empty
    rates: str = ""                  # its measured rates in use (JSON), kept for a restart
    history: str = ""                # the decide stage's history of the job (`DecideStage.histories`, JSON)
    argv: str = ""                   # the command's words (JSON); '' in rows of servers before 2026-11-29

    def words(self) -> list[str] | None:
        """The stored words of the command, or None when the row has none (raises ValueError when unreadable)."""
        if not self.argv:
            return None
        words = json.loads(self.argv)
        if not isinstance(words, list):
            raise ValueError(f"not a list: {self.argv[:80]!r}")
        return words

    def decide_history(self) -> dict | None:
        """The stored history as `DecideStage.restore` takes it (raises ValueError when it does not parse)."""
        if self.history:
            kept = json.loads(self.history)
            if not isinstance(kept, dict):
                raise ValueError(f"not an object: {self.history[:80]!r}")
            return kept
        if (self.attained_s, self.last_run_s) != (0.0, -1.0):
            return {"attained_s": self.attained_s, "last_run_s": self.last_run_s}
        return None


class Store:
    """A thin, thread-safe wrapper; every write commits (WAL mode), so a kill -9 keeps all acknowledged state."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)           # state holds commands, logs and checkpoints: owner only
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))   # SQLite's -wal/-shm inherit the mode
        os.chmod(self.path, 0o600)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}
        for name, kind in LATER_COLUMNS:             # a state folder from an older server: add them
            if name not in columns:
                self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        self._lock = threading.Lock()

    def _run(self, sql: str, args=()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def add_job(self, job_type: str, scale_factor: int, total_steps: int, priority_weight: float, command: str,
                submitted_s: float, job_id: int | None = None, entity: str = "", adaptation: str = "",
                pinned_gpu_types: str = "", slo_factor: float = 0.0, duration_s: float = 0.0,
                argv: list[str] | None = None) -> JobRow:
        """Insert a queued job; raises `DuplicateJob` when the id is taken."""
        words = json.dumps(argv) if argv is not None else ""
        with self._lock:
            if job_id is None or job_id < 0:
                job_id = self._next_id()
            try:
                self._db.execute("INSERT INTO jobs (job_id, job_type, scale_factor, total_steps, priority_weight, "
                                 "command, state, submitted_s, entity, adaptation, pinned_gpu_types, slo_factor, "
                                 "duration_s, argv) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
                                 (job_id, job_type, scale_factor, total_steps, priority_weight, command, submitted_s,
                                  entity, adaptation, pinned_gpu_types, slo_factor, duration_s, words))
            except sqlite3.IntegrityError:
                raise DuplicateJob(f"job_id: {job_id} already exists") from None
        return JobRow(job_id, job_type, scale_factor, total_steps, priority_weight, command, "queued", 0, 0,
                      submitted_s, None, "", entity, adaptation, 0, pinned_gpu_types, slo_factor, duration_s,
                      argv=words)

    def _next_id(self) -> int:
        """One above the largest id; past MAX_JOB_ID (a job submitted with that id), the lowest free one."""
        job_id = int(self._db.execute("SELECT COALESCE(MAX(job_id), -1) + 1 FROM jobs").fetchone()[0])
        if job_id <= MAX_JOB_ID:
            return job_id
        if self._db.execute("SELECT 1 FROM jobs WHERE job_id = 0").fetchone() is None:
            return 0
        gap = self._db.execute("SELECT MIN(j.job_id) + 1 FROM jobs j WHERE j.job_id < ? AND NOT EXISTS "
                               "(SELECT 1 FROM jobs k WHERE k.job_id = j.job_id + 1)", (MAX_JOB_ID,)).fetchone()[0]
        if gap is None:
            raise InvalidInput(f"job_id: every id 0..{MAX_JOB_ID} is taken")
        return int(gap)

    def page(self, after: int, limit: int, states: tuple[str, ...] = ()) -> list[JobRow]:
        """Up to `limit` jobs with id >= `after`, in id order (keyset paging: stable while jobs are added)."""
        sql, args = "SELECT * FROM jobs WHERE job_id >= ?", [after]
        if states:
            sql += f" AND state IN ({','.join('?' * len(states))})"
            args += list(states)
        return [JobRow(*r) for r in self._run(sql + " ORDER BY job_id LIMIT ?", (*args, limit))]

    def counts(self) -> dict[str, int]:
        return dict(self._run("SELECT state, COUNT(*) FROM jobs GROUP BY state"))

    def jobs(self, states: tuple[str, ...] | None = None) -> list[JobRow]:
        sql = "SELECT * FROM jobs"
        args: tuple = ()
        if states:
            sql += f" WHERE state IN ({','.join('?' * len(states))})"
            args = states
        return [JobRow(*r) for r in self._run(sql + " ORDER BY job_id", args)]

    def job(self, job_id: int) -> JobRow | None:
        rows = self._run("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        return JobRow(*rows[0]) if rows else None

    def set_progress(self, job_id: int, steps_done: int) -> None:
        """Durable progress only grows (a late report from an old lease cannot move it back)."""
        self._run("UPDATE jobs SET steps_done = MAX(steps_done, ?) WHERE job_id = ?", (steps_done, job_id))

    def set_batch_size(self, job_id: int, batch_size: int, total_steps: int, steps_done: int) -> None:
        """An adaptive job switched: its steps are counted at `batch_size` from now on (one transaction)."""
        self._run("UPDATE jobs SET batch_size = ?, total_steps = ?, steps_done = ? WHERE job_id = ?",
                  (batch_size, total_steps, steps_done, job_id))

    def set_histories(self, rows, meta: tuple[str, str] | None = None) -> None:
        """(history JSON, job_id) of the jobs whose history moved in a round, and a meta (key, value) beside them,
        in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE jobs SET history = ? WHERE job_id = ?", rows)
            if meta is not None:
                self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", meta)
            self._db.execute("COMMIT")

    def set_argvs(self, rows) -> None:
        """(argv JSON, job_id) of rows stored without their words, in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE jobs SET argv = ? WHERE job_id = ?", rows)
            self._db.execute("COMMIT")

    def set_rates(self, rows) -> None:
        """(rates JSON, job_id) of the jobs whose measured rates moved, in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE jobs SET rates = ? WHERE job_id = ?", rows)
            self._db.execute("COMMIT")

    def set_state(self, job_id: int, state: str, finished_s: float | None = None, log_tail: str | None = None,
                  attempts_delta: int = 0) -> None:
        self._run("UPDATE jobs SET state = ?, finished_s = COALESCE(?, finished_s), "
                  "log_tail = COALESCE(?, log_tail), attempts = attempts + ? WHERE job_id = ?",
                  (state, finished_s, log_tail, attempts_delta, job_id))

    def set_states(self, job_ids, state: str) -> None:
        """Many jobs to one state in one transaction (a round's new leases)."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE jobs SET state = ? WHERE job_id = ?", [(state, j) for j in job_ids])
            self._db.execute("COMMIT")

    def meta(self, key: str, default: str | None = None) -> str | None:
        rows = self._run("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    def set_meta(self, key: str, value: str) -> None:
        self._run("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                  (key, value))

    def close(self) -> None:
        with self._lock:
            self._db.close()
