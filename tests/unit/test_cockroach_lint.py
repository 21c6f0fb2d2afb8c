"""CockroachDB stays a first-class target: the SQL is linted for what it rejects.

Every named query (chalicelib/db/sql, as the loader expands it), every migration and the
migration runner's bootstrap DDL go through tests/unit/cockroach_lint.py. An exception is
allowed only here, by query name (or migration file) and rule, with the reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from chalicelib.db import migrate, notify
from chalicelib.db.queries import load_queries
from tests.unit.cockroach_lint import LEXEME, RULE_IDS, bad_samples, lint, strip

_SKIP_LOCKED_IN_LOOPS = (
    "a scheduler/housekeeper batch: correctness rests on the guarded UPDATE/DELETE (status "
    "and CAS guards), not on the lock; SKIP LOCKED only keeps a second scheduler from "
    "waiting on the first. On CockroachDB a skipped or contended row costs a retry (40001, "
    "retried by the helper) or waits for the next 1 s round, never a double action; these "
    "loops run one or a few instances, not a worker fleet's contention"
)

#: (source, rule) -> why it is allowed there. Sources: "<query name>" or "<migration file>".
ALLOWED: dict[tuple[str, str], str] = {
    ("worker_claim_skip_locked", "skip_locked"): (
        "the skip_locked claim strategy itself (PostgreSQL's default); TE_CLAIM_STRATEGY="
        "conditional_update replaces it with worker_claim_candidates/_conditional"
    ),
    ("worker_record_and_claim", "skip_locked"): (
        "the skip_locked claim strategy's record-and-claim; CockroachDB's configuration "
        "(conditional_update) never sends it"
    ),
    ("worker_record_and_claim", "table_modified_twice"): (
        "PostgreSQL only, as the line above: the record and the claim update different "
        "executions rows; CockroachDB's configuration records and claims in separate "
        "statements (worker/strategies.py, ConditionalUpdateClaim.records_with_claim)"
    ),
    ("worker_claim_skip_locked_capped", "skip_locked"): (
        "worker_claim_skip_locked while an endpoint is at its cap: the same strategy, the "
        "same exception"
    ),
    ("worker_record_and_claim_capped", "skip_locked"): (
        "worker_record_and_claim while an endpoint is at its cap: never sent on CockroachDB"
    ),
    ("worker_record_and_claim_capped", "table_modified_twice"): (
        "worker_record_and_claim while an endpoint is at its cap: PostgreSQL only"
    ),
    ("wakeup_publish", "listen_notify"): (
        "the optional wake-up accelerator; notify.enabled() keeps it off on CockroachDB "
        "and workers poll regardless"
    ),
    ("wakeup_listen", "listen_notify"): "the accelerator's listener, as wakeup_publish",
    ("jobs_create", "on_conflict_where"): (
        "predicate repeats idx_jobs_idempotency's (idempotency_key IS NOT NULL)"
    ),
    ("jobs_create_and_wake", "on_conflict_where"): (
        "predicate repeats idx_jobs_idempotency's (idempotency_key IS NOT NULL)"
    ),
    ("jobs_create_and_wake", "listen_notify"): (
        "jobs_create with the optional wake-up accelerator; used only where notify.enabled() "
        "(never on CockroachDB), and workers poll regardless"
    ),
    ("scheduler_cron_apply_ticks", "on_conflict_where"): (
        "predicate repeats idx_executions_cron_dedup's (idempotency_key IS NOT NULL)"
    ),
    ("scheduler_promote_due", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("scheduler_reclaim_stuck", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("scheduler_reclaim_listed", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("scheduler_cron_apply_ticks", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("housekeeping_purge_cron", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("housekeeping_purge_one_shot", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("housekeeping_purge_operations", "skip_locked"): _SKIP_LOCKED_IN_LOOPS,
    ("001_initial.sql", "int_without_width"): (
        "applied migration (its checksum is recorded, forward-only): jobs.version, "
        "executions.attempt_count/max_attempts and attempts/execution_logs.attempt_number "
        "are INT; their values are bounded by validation (max_attempts <= 100), so 4 bytes "
        "on PostgreSQL and 8 on CockroachDB hold the same values"
    ),
}


def _sources() -> dict[str, str]:
    """Everything linted: source name -> SQL."""
    found = {name: query.sql for name, query in _named_queries()}
    for migration in migrate.discover():
        found[migration.path.name] = migration.sql
    for i, statement in enumerate(migrate._BOOTSTRAP):
        found[f"migrate._BOOTSTRAP[{i}]"] = statement
    return found


def _named_queries() -> list[tuple[str, object]]:
    registry = load_queries()
    return [(name, registry[name]) for name in registry.names()]


@pytest.mark.parametrize("rule", RULE_IDS)
def test_each_rule_flags_its_bad_sample(rule: str) -> None:
    sample = bad_samples()[rule]
    assert rule in {f.rule for f in lint("sample", sample)}, sample


@pytest.mark.parametrize("rule", RULE_IDS)
def test_no_rule_fires_inside_comments_or_strings(rule: str) -> None:
    sample = bad_samples()[rule]
    literal = sample.replace("'", "''")
    hidden = f"-- {sample}\n/* {sample} */\nSELECT '{literal}', $x${sample}$x$ AS \"{sample}\""
    assert [f.rule for f in lint("hidden", hidden)] == []


def test_strip_keeps_the_code_and_blanks_what_is_not() -> None:
    sql = "SELECT 'it''s -- no' AS a, $q$ LIMIT $q$ -- LISTEN\n/* INT */ FROM t"
    assert strip(sql).split() == ["SELECT", "'?'", "AS", "a,", "'?'", "FROM", "t"]


@pytest.mark.parametrize(
    "sql",
    [
        # A LIMIT inside the subquery that bounds an UPDATE is the portable shape.
        "UPDATE t SET a = 1 WHERE id IN (SELECT id FROM t ORDER BY id LIMIT 10)",
        "WITH c AS (DELETE FROM t WHERE a RETURNING id) SELECT id FROM c LIMIT 5",
        "SELECT id FROM t FOR UPDATE LIMIT 1",
        "INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2",
        "SELECT CAST(:n AS BIGINT), INTERVAL '1 millisecond', CAST(:m AS INT8)",
    ],
)
def test_portable_shapes_pass(sql: str) -> None:
    assert [f.rule for f in lint("portable", sql)] == []


def test_update_and_delete_with_their_own_limit_are_flagged() -> None:
    cte = "WITH c AS (UPDATE t SET a = 1 WHERE b LIMIT 3 RETURNING id) SELECT id FROM c"
    assert "update_delete_limit" in {f.rule for f in lint("cte", cte)}


def test_the_project_sql_passes_the_cockroach_lint() -> None:
    findings = [
        f
        for source, sql in _sources().items()
        for f in lint(source, sql)
        if (f.source, f.rule) not in ALLOWED
    ]
    assert findings == [], "\n".join(map(str, findings))


def test_every_exception_is_still_needed() -> None:
    # An exception whose SQL was fixed (or renamed) must go, so the list stays honest.
    fired = {(f.source, f.rule) for source, sql in _sources().items() for f in lint(source, sql)}
    assert set(ALLOWED) - fired == set()


#: A Python string that is SQL: starts with an upper-case statement keyword, or is a bare
#: LISTEN/NOTIFY of one channel. f-strings count, their fields read as ``x``.
_INLINE_SQL = re.compile(
    r"^\s*(?:(?:SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|SET|BEGIN|LOCK|TRUNCATE"
    r"|VACUUM)\s|(?:UN)?LISTEN\s+\w+\s*$|NOTIFY\s+\w+)"
)


def _inline_sql(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in pieces:
            continue  # read as part of its f-string
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
        else:
            continue
        if _INLINE_SQL.match(text):
            found.append((node.lineno, text))
    return found


def test_sql_written_inline_in_the_code_passes_too() -> None:
    # SQL belongs in the named files, but what is still inline (the migration runner's
    # bookkeeping, the embedded server's setup) is on a required path all the same. The
    # wake-up's LISTEN and pg_notify were inline f-strings here, out of the lint's sight.
    root = Path(__file__).resolve().parents[2]
    findings = [
        f
        for path in sorted((root / "chalicelib").rglob("*.py"))
        for line, sql in _inline_sql(ast.parse(path.read_text(encoding="utf-8")))
        for f in lint(f"{path.relative_to(root)}:{line}", sql)
    ]
    assert findings == [], "\n".join(map(str, findings))


def test_inline_sql_is_found_in_strings_and_f_strings() -> None:
    tree = ast.parse(
        'a = "LISTEN connection lost"\n'
        'b = f"LISTEN {CHANNEL}"\n'
        "c = f\"SELECT pg_notify('{CHANNEL}', '')\"\n"
        'd = "SELECT 1 FROM t"\n'
    )
    assert [line for line, _ in _inline_sql(tree)] == [2, 3, 4]


def test_the_lint_covers_every_file() -> None:
    sources = _sources()
    files = {query.source for _, query in _named_queries()}  # type: ignore[attr-defined]
    assert files >= {"worker.sql", "scheduler.sql", "wakeup.sql", "jobs.sql"}
    assert {m.path.name for m in migrate.discover()} <= set(sources)


def test_the_wakeup_statements_use_the_channel_the_code_names() -> None:
    registry = load_queries()
    assert notify.CHANNEL in registry["wakeup_publish"].sql
    assert strip(registry["wakeup_listen"].sql).split() == ["LISTEN", notify.CHANNEL]


def test_no_migration_hides_a_statement_end_in_a_literal() -> None:
    # migrate.split_statements splits on ";" at a line end; a function body or a string
    # literal holding one would be cut in two (function bodies are refused above).
    for migration in migrate.discover():
        literals = [
            m.group(0)
            for m in LEXEME.finditer(migration.sql)
            if m.lastgroup in ("dollar", "string") and ";" in m.group(0)
        ]
        assert literals == [], migration.path.name
