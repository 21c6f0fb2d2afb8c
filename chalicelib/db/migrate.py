"""Forward-only migration runner (its command line is ``python -m chalicelib.migrate``;
``python -m chalicelib.db.migrate`` runs that same command).

Applied migrations are recorded in ``schema_migrations`` with a checksum. Each file runs in
one transaction together with its record, after updating the single row of
``schema_migrations_lock``: two processes migrating at once serialize on that row, and the
second finds the version already recorded and skips it. Running twice is a no-op. A file
whose content changed after it was applied is an error (forward-only: add a new file).
"""

from __future__ import annotations

import hashlib
import logging
import re
import runpy
from dataclasses import dataclass
from pathlib import Path

from chalicelib.db.connection import Database, Transaction
from chalicelib.errors import DatabaseError, TaskExecutorError, UniqueViolation

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
_FILE = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")

_BOOTSTRAP = (
    """CREATE TABLE IF NOT EXISTS schema_migrations (
        version     TEXT         NOT NULL,
        checksum    TEXT         NOT NULL,
        applied_at  TIMESTAMPTZ  NOT NULL DEFAULT now(),
        CONSTRAINT pk_schema_migrations PRIMARY KEY (version)
    )""",
    """CREATE TABLE IF NOT EXISTS schema_migrations_lock (
        id BIGINT NOT NULL, CONSTRAINT pk_schema_migrations_lock PRIMARY KEY (id)
    )""",
    "INSERT INTO schema_migrations_lock (id) VALUES (1) ON CONFLICT (id) DO NOTHING",
)


class MigrationError(TaskExecutorError):
    """A migration file is malformed or was edited after it was applied."""


@dataclass(frozen=True)
class Migration:
    version: str
    path: Path
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()

    def statements(self) -> list[str]:
        return split_statements(self.sql)


def split_statements(sql: str) -> list[str]:
    """Split a migration into statements: ``;`` at a line end, ``--`` comments dropped.

    Migrations are plain DDL/DML (no function bodies or string literals holding ``;``), a
    rule this splitter relies on and tests/unit/test_cockroach_lint.py enforces.
    """
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    parts = re.split(r";\s*$", "\n".join(lines), flags=re.MULTILINE)
    return [p.strip() for p in parts if p.strip()]


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise MigrationError(f"migration file name must be NNN_name.sql: {path.name}")
        migrations.append(Migration(match.group(1), path, path.read_text(encoding="utf-8")))
    versions = [m.version for m in migrations]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {directory}")
    return migrations


def _bootstrap(db: Database) -> None:
    def work(tx: Transaction) -> None:
        for statement in _BOOTSTRAP:
            tx.execute(statement)

    # Two processes creating the same table at once can collide in PostgreSQL's catalog
    # (unique violation on pg_type); the loser simply tries again and finds the table.
    for attempt in range(5):
        try:
            db.transaction(work, name="migrate_bootstrap")
            return
        except (UniqueViolation, DatabaseError):
            if attempt == 4:
                raise


def _apply(db: Database, migration: Migration) -> bool:
    def work(tx: Transaction) -> bool:
        # An UPDATE, not SELECT ... FOR UPDATE: under SERIALIZABLE the waiter must fail with
        # 40001 once the holder commits (and be retried with a fresh snapshot that sees the
        # recorded version); a mere row lock would let it proceed on its stale snapshot.
        tx.execute("UPDATE schema_migrations_lock SET id = id WHERE id = 1")
        row = tx.one(
            "SELECT checksum FROM schema_migrations WHERE version = :v", v=migration.version
        )
        if row is not None:
            if row["checksum"] != migration.checksum:
                raise MigrationError(
                    f"migration {migration.path.name} changed after it was applied; "
                    "migrations are forward-only, add a new file instead"
                )
            return False
        for statement in migration.statements():
            tx.execute(statement)
        tx.execute(
            "INSERT INTO schema_migrations (version, checksum) VALUES (:v, :c)",
            v=migration.version,
            c=migration.checksum,
        )
        return True

    return db.transaction(work, name=f"migrate_{migration.version}")


def migrate(db: Database, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply every pending migration; return the versions this call applied."""
    _bootstrap(db)
    applied = []
    for migration in discover(directory):
        if _apply(db, migration):
            log.info("applied migration %s", migration.path.name)
            applied.append(migration.version)
    return applied


if __name__ == "__main__":
    # One migrate command: run chalicelib.migrate's (same options, output and exit status).
    # Named, not imported: db/ stays below wiring, which that command resolves the database
    # through.
    runpy.run_module("chalicelib.migrate", run_name="__main__", alter_sys=True)
