"""The data layer against real PostgreSQL at SERIALIZABLE: migrations, retries, reconnects."""

from __future__ import annotations

import threading

import pg8000.native
import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.migrate import discover, migrate, split_statements
from chalicelib.db.queries import queries
from chalicelib.errors import DatabaseUnavailable, TransactionRetriesExhausted, UniqueViolation

SPEC_TABLES = {
    "payload_specs",
    "configs",
    "secrets",
    "endpoints",
    "jobs",
    "executions",
    "attempts",
    "execution_logs",
    "region_heartbeats",
    "region_status",
    "api_keys",
}

SPEC_INDEXES = {
    "idx_endpoints_type",
    "idx_jobs_idempotency",
    "idx_jobs_cron_due",
    "idx_jobs_endpoint",
    "idx_jobs_status",
    # idx_executions_pickup is replaced by idx_executions_due, which has its predicate and
    # serves its query in order (migrations/013_attempt_log_lines.sql).
    "idx_executions_due",
    "idx_executions_cron_dedup",
    "idx_executions_by_job",
    "idx_executions_running",
    # idx_attempts_by_execution had the keys of uq_attempts_exec_number, which serves its
    # reads (migrations/012_one_attempts_index.sql).
    "idx_logs_by_execution",
    # idx_logs_by_attempt had no reader (migrations/013_attempt_log_lines.sql).
}

SPEC_CONSTRAINTS = {
    "pk_payload_specs",
    "pk_configs",
    "pk_secrets",
    "pk_endpoints",
    "fk_endpoints_payload_spec",
    "fk_endpoints_config",
    "chk_endpoint_type",
    "pk_jobs",
    "fk_jobs_endpoint",
    "chk_trigger_type",
    "chk_status",
    "pk_executions",
    "fk_executions_job",
    "chk_exec_status",
    "pk_attempts",
    "fk_attempts_execution",
    "uq_attempts_exec_number",
    "chk_attempt_status",
    "pk_execution_logs",
    "fk_logs_execution",
    "chk_log_level",
    "pk_region_heartbeats",
    "pk_region_status",
}


def test_schema_has_every_table_index_and_constraint_of_the_spec(database: Database) -> None:
    tables = {
        r["table_name"]
        for r in database.run(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    }
    assert tables >= SPEC_TABLES
    indexes = {r["indexname"] for r in database.run("SELECT indexname FROM pg_indexes")}
    assert indexes >= SPEC_INDEXES
    constraints = {r["conname"] for r in database.run("SELECT conname FROM pg_constraint")}
    assert constraints >= SPEC_CONSTRAINTS
    due = database.run("SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_executions_due'")[0][
        "indexdef"
    ]
    assert "WHERE" in due and "QUEUED" in due and "RETRYING" in due
    region = database.run("SELECT region, alive FROM region_status")
    assert region == [{"region": "default", "alive": True}]


def test_prefixed_ids_are_generated_by_the_database(database: Database) -> None:
    database.execute("INSERT INTO configs (name, values_json) VALUES ('c', '{}')")
    database.execute("INSERT INTO endpoints (name, endpoint_type, spec) VALUES ('e', 'HTTP', '{}')")
    job_id = database.run(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type) VALUES ('e','HTTP','IMMEDIATE') "
        "RETURNING job_id"
    )[0]["job_id"]
    assert job_id.startswith("job_") and len(job_id) == 36


def test_migrations_run_twice_are_a_no_op(database: Database) -> None:
    assert migrate(database) == []


def test_two_concurrent_migration_runs_apply_each_version_once(pg_server, db_url) -> None:
    admin = pg_server.admin()
    admin.run("CREATE DATABASE te_fresh_concurrent")
    admin.close()
    url = pg_server.url("te_fresh_concurrent")
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate(Database.from_url(url, pool_size=1)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    applied = sorted(v for r in results for v in r)
    assert applied == sorted(m.version for m in discover())
    db = Database.from_url(url, pool_size=1)
    assert len(db.run("SELECT version FROM schema_migrations")) == len(discover())
    db.close()
    admin = pg_server.admin()
    admin.run("DROP DATABASE te_fresh_concurrent WITH (FORCE)")
    admin.close()


def test_split_statements_handles_comments_and_multiline() -> None:
    sql = "-- header;\nCREATE TABLE a (x INT);\n\n-- c\nINSERT INTO a VALUES (1);\n"
    assert split_statements(sql) == ["CREATE TABLE a (x INT)", "INSERT INTO a VALUES (1)"]


def test_forced_serialization_failure_is_retried(database: Database) -> None:
    calls = {"n": 0}

    def work(tx: Transaction) -> int:
        calls["n"] += 1
        if calls["n"] < 3:
            tx.run("DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END $$")
        return int(tx.scalar("SELECT 42 AS answer"))

    assert database.transaction(work, name="forced") == 42
    assert calls["n"] == 3
    assert database.stats.serialization_retries == 2


def test_retries_run_out_with_a_clear_error(db_url: str) -> None:
    db = Database.from_url(db_url, pool_size=1, max_retries=2, sleep=lambda _: None)

    def work(tx: Transaction) -> None:
        tx.run("DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END $$")

    with pytest.raises(TransactionRetriesExhausted):
        db.transaction(work, name="always_conflicts")
    db.close()


def concurrent_bumps(db: Database, *, race_window: bool = False) -> int:
    """Four threads each add 1 to a counter ten times (read, then write); the final value."""
    db.execute("CREATE TABLE counter (id INT PRIMARY KEY, n BIGINT NOT NULL)")
    db.execute("INSERT INTO counter VALUES (1, 0)")
    barrier = threading.Barrier(4)

    def bump(tx: Transaction) -> None:
        n = int(tx.scalar("SELECT n FROM counter WHERE id = 1"))
        if race_window:
            tx.scalar("SELECT pg_sleep(0.002)")
        tx.execute("UPDATE counter SET n = :n WHERE id = 1", n=n + 1)

    def worker() -> None:
        barrier.wait()
        for _ in range(10):
            db.transaction(bump, name="bump")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return int(db.run("SELECT n FROM counter")[0]["n"])


def test_real_write_skew_conflict_is_retried_to_a_consistent_result(database: Database) -> None:
    assert concurrent_bumps(database) == 40


def test_dropped_connection_reconnects_on_next_use(database: Database) -> None:
    pid = database.run("SELECT pg_backend_pid() AS pid")[0]["pid"]
    other = Database(database.params, pool_size=1)
    other.run("SELECT pg_terminate_backend(:pid)", pid=pid)
    other.close()
    # The pooled connection is dead; the helper discards it and retries on a fresh one.
    assert database.run("SELECT 1 AS one") == [{"one": 1}]
    assert database.stats.reconnects >= 1


def test_a_connection_lost_inside_a_transaction_is_retried_once_then_unavailable(
    database: Database,
) -> None:
    runs = []

    def work(tx: Transaction) -> None:
        runs.append(len(runs))
        tx.run("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(DatabaseUnavailable, match=r"^lost_twice: "):
        database.transaction(work, name="lost_twice")
    assert runs == [0, 1]


def test_a_connection_lost_during_commit_is_not_run_again(database: Database) -> None:
    # A deferred trigger ends the session while COMMIT runs: its outcome is unknown.
    database.execute("CREATE TABLE commit_probe (n INT)")
    database.execute(
        "CREATE FUNCTION end_my_session() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$"
    )
    database.execute(
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON commit_probe "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION end_my_session()"
    )
    runs = []

    def work(tx: Transaction) -> None:
        runs.append(len(runs))
        tx.execute("INSERT INTO commit_probe VALUES (1)")

    with pytest.raises(DatabaseUnavailable, match=r"^commit_lost: "):
        database.transaction(work, name="commit_lost")
    assert runs == [0]


def test_unique_violation_is_translated(database: Database) -> None:
    database.execute("INSERT INTO configs (name, values_json) VALUES ('dup', '{}')")
    with pytest.raises(UniqueViolation):
        database.execute("INSERT INTO configs (name, values_json) VALUES ('dup', '{}')")


@pytest.fixture
def read_committed_url(pg_server, db_url: str) -> str:
    """The test database with an ordinary PostgreSQL's default: READ COMMITTED."""
    name = db_url.split("?")[0].rsplit("/", 1)[1]
    admin = pg_server.admin()
    try:
        admin.run(f"ALTER DATABASE {name} SET default_transaction_isolation = 'read committed'")
    finally:
        admin.close()
    return db_url


def test_transactions_are_serializable_on_a_read_committed_server(read_committed_url: str) -> None:
    db = Database.from_url(read_committed_url, pool_size=4)
    plain = pg8000.native.Connection(**_plain_kwargs(db))  # as any other client connects
    try:
        assert plain.run("SHOW default_transaction_isolation") == [["read committed"]]
        level = db.transaction(lambda tx: tx.scalar("SHOW transaction_isolation"))
        assert level == "serializable"
        # One statement without BEGIN (Database.statement) runs SERIALIZABLE too.
        single = db.transaction(lambda tx: tx.scalar("SHOW transaction_isolation"), single=True)
        assert single == "serializable"

        def lowered(tx: Transaction) -> object:
            tx.execute(queries["worker_read_committed"])  # the worker's documented exception
            return tx.scalar("SHOW transaction_isolation")

        assert db.transaction(lowered) == "read committed"
    finally:
        plain.close()
        db.close()


def _plain_kwargs(db: Database) -> dict[str, object]:
    p = db.params
    where = {"unix_sock": p.unix_sock} if p.unix_sock else {"host": p.host, "port": p.port}
    return {"user": p.user, "password": p.password, "database": p.database, **where}


def test_lost_updates_are_prevented_on_a_read_committed_server(read_committed_url: str) -> None:
    """The read-modify-write the services rely on stays correct without a server default."""
    db = Database.from_url(read_committed_url, pool_size=4)
    try:
        assert concurrent_bumps(db, race_window=True) == 40
    finally:
        db.close()


def test_a_prepared_statement_outlived_by_a_schema_change_is_prepared_again(
    database: Database,
) -> None:
    """Statements with parameters are prepared once per connection; a migration that
    changes a table under one makes PostgreSQL refuse it ("cached plan must not change
    result type"): the transaction runs again on a freshly prepared statement."""
    solo = Database(database.params, pool_size=1)  # one connection: reused
    try:
        solo.execute("CREATE TABLE shapes (id INT PRIMARY KEY, a TEXT)")
        solo.execute("INSERT INTO shapes VALUES (1, 'x')")
        read = "SELECT * FROM shapes WHERE id = :id"
        assert solo.run(read, id=1) == [{"id": 1, "a": "x"}]
        solo.execute("ALTER TABLE shapes ADD COLUMN b TEXT DEFAULT 'y'")
        assert solo.run(read, id=1) == [{"id": 1, "a": "x", "b": "y"}]
    finally:
        solo.close()


def test_prepared_statements_per_connection_are_bounded(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chalicelib.db import statements

    monkeypatch.setattr(statements, "MAX_PREPARED", 3)
    solo = Database(database.params, pool_size=1)
    try:
        for n in range(8):  # eight different statements on the one connection
            assert solo.run(f"SELECT CAST(:v AS INT) + {n} AS s", v=1) == [{"s": 1 + n}]
        held = solo.run("SELECT count(*) AS n FROM pg_prepared_statements")[0]["n"]
        assert held == 3  # the least recently used were closed on the server too
    finally:
        solo.close()


def test_a_statement_missing_a_parameter_fails_once_as_a_bug_not_an_outage(
    database: Database,
) -> None:
    """pg8000 reports a placeholder without its parameter with the error class of a lost
    connection; read as one, every loop retried it forever (a bulk operation stayed
    RUNNING). It is a TypeError, raised once, never retried."""
    from chalicelib.db.faults import is_transient

    calls = []

    def work(tx: Transaction) -> None:
        calls.append(1)
        tx.run("SELECT CAST(:a AS INT) + CAST(:b AS INT) AS n", a=1)

    with pytest.raises(TypeError, match="placeholder 'b'") as raised:
        database.transaction(work, name="missing_parameter")
    assert not is_transient(raised.value)
    assert calls == [1]
