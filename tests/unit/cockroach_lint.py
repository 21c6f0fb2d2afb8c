"""A linter for SQL that must run on PostgreSQL and CockroachDB alike.

CockroachDB cannot run on the build machines, so this is what keeps it a first-class
target: every migration and named query is checked for constructs CockroachDB rejects or
treats differently from PostgreSQL (sources: CockroachDB's "PostgreSQL compatibility" page,
its SQL feature support list, and the database rules of
docs/explanation/design.md). Each rule says why.

Matching runs on the SQL with comments, string literals and quoted identifiers blanked
out (:func:`strip`), so a rule never fires on prose in a why-comment or inside a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

LEXEME = re.compile(
    r"""
      (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<dollar>\$(?P<tag>[A-Za-z_]*)\$.*?\$(?P=tag)\$)
    | (?P<string>[EeBbXx]?'(?:[^']|'')*')
    | (?P<ident>"(?:[^"]|"")*")
    """,
    re.VERBOSE | re.DOTALL,
)


def strip(sql: str) -> str:
    """``sql`` with comments removed and every literal replaced by a neutral token.

    String and dollar-quoted literals become ``'?'``, quoted identifiers ``"?"``, so
    keywords inside them cannot match; line breaks inside comments are kept (positions
    stay readable in a failure message).
    """

    def blank(match: re.Match[str]) -> str:
        kind = match.lastgroup
        if kind in ("line_comment", "block_comment"):
            return " " + "\n" * match.group(0).count("\n")
        if kind == "ident":
            return '"?"'
        return "'?'"

    return LEXEME.sub(blank, sql)


@dataclass(frozen=True)
class Rule:
    """One construct to refuse, and why."""

    id: str
    pattern: re.Pattern[str]
    why: str
    bad: str  #: a small sample the rule must flag (the linter's own test feeds it)


def _rule(rule_id: str, pattern: str, why: str, bad: str) -> Rule:
    return Rule(rule_id, re.compile(pattern, re.IGNORECASE | re.DOTALL), why, bad)


RULES: tuple[Rule, ...] = (
    _rule(
        "serial",
        r"\b(?:SMALL|BIG)?SERIAL[248]?\b",
        "CockroachDB's SERIAL is unique_rowid() by default (64-bit, neither dense nor "
        "ordered), PostgreSQL's a sequence: ids differ in size and shape. Use TEXT ids "
        "from gen_random_uuid() as the schema does.",
        "CREATE TABLE t (id SERIAL PRIMARY KEY)",
    ),
    _rule(
        "int_without_width",
        r"\bINT(?:EGER)?\b",
        "INT is 8 bytes on CockroachDB and 4 on PostgreSQL: a value that fits one may "
        "overflow the other. Write BIGINT/INT8 (or INT4 where 4 bytes is meant).",
        "SELECT CAST(:n AS INTEGER)",
    ),
    _rule(
        "listen_notify",
        r"\b(?:UN)?LISTEN\b|\bNOTIFY\b|\bpg_notify\s*\(",
        "CockroachDB has no LISTEN/NOTIFY: nothing on a required path may depend on it "
        "(only the optional wake-up accelerator, which polling backs up, may use it).",
        "SELECT pg_notify('jobs', '')",
    ),
    _rule(
        "skip_locked",
        r"\bSKIP\s+LOCKED\b",
        "CockroachDB's SKIP LOCKED has open issues under contention; it is allowed only in "
        "the skip_locked claim strategy, which TE_CLAIM_STRATEGY can swap out.",
        "SELECT id FROM t FOR UPDATE SKIP LOCKED",
    ),
    _rule(
        "advisory_lock",
        r"\bpg_(?:try_)?advisory_\w+\s*\(",
        "CockroachDB does not implement advisory locks (at most compatibility stubs "
        "that lock nothing), so mutual exclusion built on them disappears there.",
        "SELECT pg_advisory_xact_lock(42)",
    ),
    _rule(
        "sequence",
        r"\bCREATE\s+(?:TEMP(?:ORARY)?\s+)?SEQUENCE\b|\b(?:nextval|setval|currval)\s*\(",
        "A sequence on CockroachDB is one contended row (every nextval a distributed "
        "write, a hotspot under load); ids come from gen_random_uuid() instead.",
        "SELECT nextval('job_ids')",
    ),
    _rule(
        "deferrable_constraint",
        r"\bDEFERRABLE\b|\bINITIALLY\s+DEFERRED\b|\bSET\s+CONSTRAINTS\b",
        "CockroachDB does not support deferrable constraints: every constraint is checked "
        "at the end of each statement.",
        "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (a) DEFERRABLE",
    ),
    _rule(
        "exclusion_constraint",
        r"\bEXCLUDE\s+(?:USING\b|\()",
        "CockroachDB does not support exclusion constraints.",
        "CREATE TABLE r (s TSTZRANGE, EXCLUDE USING gist (s WITH &&))",
    ),
    _rule(
        "trigger_or_function",
        r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?"
        r"(?:TRIGGER|FUNCTION|PROCEDURE|RULE)\b|\bLANGUAGE\s+plpgsql\b|\bDO\s+'\?'",
        "Triggers, rules and PL/pgSQL are missing or partial on CockroachDB (triggers "
        "arrived late, with a subset of PL/pgSQL): logic lives in the application.",
        "CREATE TRIGGER t_audit AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION audit()",
    ),
    _rule(
        "index_concurrently",
        r"\b(?:CREATE\s+(?:UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX\s+\w+)\s+CONCURRENTLY\b",
        "CockroachDB builds every index online and ignores CONCURRENTLY, while PostgreSQL "
        "refuses it inside a transaction, and every migration runs in one.",
        "CREATE INDEX CONCURRENTLY idx_t_a ON t (a)",
    ),
    _rule(
        "system_column",
        r"\b(?:xmin|xmax|cmin|cmax|ctid|tableoid)\b",
        "PostgreSQL's system columns (xmin, ctid, ...) do not exist on CockroachDB "
        "(MVCC there is crdb_internal_mvcc_timestamp); no CAS may be built on them.",
        "UPDATE t SET a = 1 WHERE id = :id AND xmin = :seen",
    ),
    _rule(
        "on_conflict_without_target",
        r"\bON\s+CONFLICT\s+DO\b",
        "docs/explanation/design.md: ON CONFLICT names its target. Arbiter inference "
        "without one differs "
        "between the two with partial unique indexes.",
        "INSERT INTO t (a) VALUES (1) ON CONFLICT DO NOTHING",
    ),
    _rule(
        "on_conflict_where",
        r"\bON\s+CONFLICT\s*\([^)]*\)\s*WHERE\b",
        "ON CONFLICT (...) WHERE picks a partial unique index as arbiter; CockroachDB "
        "infers one only when the predicate implies the index's own, so each use must "
        "repeat its index's predicate exactly and is listed here with that index.",
        "INSERT INTO t (a) VALUES (1) ON CONFLICT (a) WHERE b DO NOTHING",
    ),
    _rule(
        "cockroach_only_syntax",
        r"\bUPSERT\b|\bAS\s+OF\s+SYSTEM\s+TIME\b|\bcrdb_internal\w*|\bSTORING\s*\(",
        "CockroachDB-only syntax (UPSERT, AS OF SYSTEM TIME, crdb_internal, STORING) "
        "that PostgreSQL rejects.",
        "UPSERT INTO t (a) VALUES (1)",
    ),
    _rule(
        "lock_table",
        r"\bLOCK\s+(?:TABLE\s+)?[a-z_]+\s+IN\b|\bLOCK\s+TABLE\b",
        "CockroachDB has no LOCK TABLE; serialize on a row instead "
        "(as schema_migrations_lock does).",
        "LOCK TABLE jobs IN EXCLUSIVE MODE",
    ),
    _rule(
        "maintenance_statement",
        r"(?:^|;)\s*(?:VACUUM|CLUSTER|REINDEX)\b",
        "VACUUM, CLUSTER and REINDEX do not exist on CockroachDB (it compacts and "
        "garbage-collects on its own).",
        "VACUUM ANALYZE executions",
    ),
    _rule(
        "temporary_table",
        r"\bCREATE\s+(?:GLOBAL\s+|LOCAL\s+)?TEMP(?:ORARY)?\s+TABLE\b|\bON\s+COMMIT\s+DROP\b",
        "Temporary tables are experimental on CockroachDB (behind a session setting).",
        "CREATE TEMP TABLE batch (id TEXT)",
    ),
    _rule(
        "extension",
        r"\bCREATE\s+EXTENSION\b",
        "CockroachDB has no extensions; what the schema needs (gen_random_uuid) is built "
        "into both.",
        "CREATE EXTENSION IF NOT EXISTS pgcrypto",
    ),
    _rule(
        "alter_column_type",
        r"\bALTER\s+(?:COLUMN\s+)?[a-z_]+\s+(?:SET\s+DATA\s+)?TYPE\b",
        "Changing a column's type is an experimental, non-transactional schema change on "
        "CockroachDB; add a new column and backfill instead.",
        "ALTER TABLE executions ALTER COLUMN attempt_count TYPE BIGINT",
    ),
    _rule(
        "unsupported_index_method",
        r"\bUSING\s+(?:hash|brin|spgist)\b",
        "CockroachDB indexes are B-tree-like (plus inverted and spatial): hash, BRIN and "
        "SP-GiST indexes are refused.",
        "CREATE INDEX idx_t_a ON t USING brin (a)",
    ),
)

RULES_BY_ID = {rule.id: rule for rule in RULES}

_UPDATE_DELETE_LIMIT = "update_delete_limit"
UPDATE_DELETE_LIMIT_WHY = (
    "UPDATE ... LIMIT and DELETE ... LIMIT are CockroachDB extensions PostgreSQL rejects; "
    "bound the rows in a subquery or CTE (WHERE id IN (SELECT ... LIMIT n))."
)
UPDATE_DELETE_LIMIT_BAD = "DELETE FROM execution_logs WHERE logged_at < :cutoff LIMIT 1000"
_MODIFIED_TWICE = "table_modified_twice"
MODIFIED_TWICE_WHY = (
    "CockroachDB refuses a statement whose data-modifying parts write one table twice "
    "(two UPDATE, INSERT or DELETE CTEs on it), even on different rows; PostgreSQL allows "
    "it. Split it into statements of one transaction."
)
MODIFIED_TWICE_BAD = "WITH a AS (UPDATE t SET x = 1 WHERE id = 1) UPDATE t SET x = 2 WHERE id = 2"
#: Rule ids, the structural ones included.
RULE_IDS = (*RULES_BY_ID, _UPDATE_DELETE_LIMIT, _MODIFIED_TWICE)

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[();]")
#: An UPDATE or DELETE after these words is not a statement (FOR UPDATE, ON DELETE, DO UPDATE).
_NOT_A_STATEMENT_AFTER = {"FOR", "ON", "DO", "KEY"}


def _update_delete_limit(stripped: str) -> bool:
    """Whether an UPDATE or DELETE statement has a LIMIT of its own (not a subquery's)."""
    tokens = [t.upper() for t in _TOKEN.findall(stripped)]
    for i, token in enumerate(tokens):
        if token not in ("UPDATE", "DELETE") or (i and tokens[i - 1] in _NOT_A_STATEMENT_AFTER):
            continue
        depth = 0
        for later in tokens[i + 1 :]:
            if later == "(":
                depth += 1
            elif later == ")":
                depth -= 1
                if depth < 0:
                    break  # the CTE or subquery holding the statement ends
            elif later == ";" and depth == 0:
                break
            elif later == "LIMIT" and depth == 0:
                return True
    return False


def _modified_twice(stripped: str) -> bool:
    """Whether one statement (of those ``;`` separates) has one table as the target of two
    UPDATE, INSERT or DELETE parts."""
    tokens = [t.upper() for t in _TOKEN.findall(stripped)] + [";"]
    targets: list[str] = []
    for i, token in enumerate(tokens[:-1]):
        if token == ";":
            if len(targets) != len(set(targets)):
                return True
            targets = []
        elif i and tokens[i - 1] in _NOT_A_STATEMENT_AFTER:
            continue
        elif token == "UPDATE":
            targets.append(tokens[i + 1])
        elif (token, tokens[i + 1]) in (("INSERT", "INTO"), ("DELETE", "FROM")):
            targets.append(tokens[i + 2])
    return len(targets) != len(set(targets))


@dataclass(frozen=True)
class Finding:
    source: str  #: file and query name, or migration file
    rule: str
    why: str

    def __str__(self) -> str:
        return f"{self.source}: {self.rule}: {self.why}"


def lint(source: str, sql: str) -> Iterator[Finding]:
    """Every rule ``sql`` breaks (at most one finding per rule)."""
    stripped = strip(sql)
    for rule in RULES:
        if rule.pattern.search(stripped):
            yield Finding(source, rule.id, rule.why)
    if _update_delete_limit(stripped):
        yield Finding(source, _UPDATE_DELETE_LIMIT, UPDATE_DELETE_LIMIT_WHY)
    if _modified_twice(stripped):
        yield Finding(source, _MODIFIED_TWICE, MODIFIED_TWICE_WHY)


def bad_samples() -> dict[str, str]:
    """Rule id -> a sample the rule must flag."""
    samples = {rule.id: rule.bad for rule in RULES}
    samples[_UPDATE_DELETE_LIMIT] = UPDATE_DELETE_LIMIT_BAD
    samples[_MODIFIED_TWICE] = MODIFIED_TWICE_BAD
    return samples
