"""One source of truth per SQL contract: one region marker, no statement copied into
another, and every query name the code cites exists."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from chalicelib.db.queries import (
    REGION_MARKER,
    SQL_DIR,
    Query,
    expand_includes,
    load_queries,
    parse_sql_file,
)
from tests.unit.cockroach_lint import strip

ROOT = Path(__file__).resolve().parents[2]
#: Consecutive code lines two statements may not share (a copied tail or CTE).
WINDOW = 6


def _raw_statements() -> list[Query]:
    """Every statement as written (includes not expanded)."""
    found: list[Query] = []
    for path in sorted(SQL_DIR.glob("*.sql")):
        found.extend(parse_sql_file(path.read_text(encoding="utf-8"), path.name).queries)
    return found


def _raw_parts() -> dict[str, str]:
    """Every part as written, as "<file> <part>" (a part's name is its file's own)."""
    parts: dict[str, str] = {}
    for path in sorted(SQL_DIR.glob("*.sql")):
        for name, sql in parse_sql_file(path.read_text(encoding="utf-8"), path.name).parts.items():
            parts[f"{path.name} {name}"] = sql
    return parts


#: An include line: a reference to a part, not a copy of it.
_INCLUDE_LINE = re.compile(r"^,? ?--\s*include:.*$", re.MULTILINE)
#: The claim's walk, "picked": written once per strategy and shape (a CTE cannot be locked
#: from outside it, and each shape is a statement), so test_the_claim_walks_agree checks the
#: copies instead.
_WALK = re.compile(
    r"^(?:WITH |, )?picked AS (?:MATERIALIZED )?\(\n    SELECT execution_id, endpoint, run_at\n"
    r".*?^\)$",
    re.MULTILINE | re.DOTALL,
)


#: Fragments no part can hold without changing a plan (a WHERE clause or a column list, a
#: correlated LATERAL body, a scan one statement locks and another does not), written out
#: in each statement or part that sends them instead: the kind, its first and last line,
#: and every holder. test_the_written_out_copies_agree holds each kind's copies to one
#: text, so the window check counts a copy as a line of its holder's own.
WRITTEN_OUT: dict[str, tuple[str, str, frozenset[str]]] = {
    "the redrive's match": (
        "FROM executions AS x",
        "AND (CAST(:error_type AS TEXT) IS NULL OR x.last_error_type = :error_type)",
        frozenset({"dead_letters_redrive_batch", "dead_letters_redrive_more"}),
    ),
    "the cancel's log line": (
        "RETURNING execution_id, attempt_count, batch_id, ordering_key, concurrency_key",
        "SELECT execution_id, batch_id, ordering_key, concurrency_key FROM moved",
        frozenset({"executions_cancel", "operations_cancel_page"}),
    ),
    "the expired leases' scan": (
        "WHERE status = '?'",
        "LIMIT :batch",
        frozenset({"scheduler_reclaim_stuck", "scheduler_reclaim_candidates"}),
    ),
    "the reclaim's rows": (
        "SELECT d.execution_id, d.status,",
        "FROM described AS d",
        frozenset({"scheduler_reclaim_stuck", "scheduler_reclaim_listed"}),
    ),
    "the oldest parked probe": (
        "WHERE en.parked_rows",
        "LIMIT 1",
        frozenset(
            {"part metrics.sql metrics_endpoint_lag", "part parts.sql metrics_oldest_due_run_at"}
        ),
    ),
    "the heartbeats' columns": (
        "json_agg(json_build_array(h.component, h.metadata)), CAST('?' AS JSON)",
        "(SELECT kinds FROM metrics_live_processes) AS kinds",
        frozenset({"health_state", "metrics_snapshot"}),
    ),
}


def _code_lines(sql: str) -> list[str]:
    """``sql``'s code lines, comments and includes dropped, literals blanked, spaces
    collapsed."""
    sql = _WALK.sub("", _INCLUDE_LINE.sub("", sql))
    return [" ".join(line.split()) for line in strip(sql).splitlines() if line.strip()]


def _copies(kind: str, lines: list[str]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The copies of ``kind`` in ``lines``, and ``lines`` with each copy one line naming it."""
    first, last, _ = WRITTEN_OUT[kind]
    first, last = " ".join(first.split()), " ".join(last.split())
    copies: list[tuple[str, ...]] = []
    rest: list[str] = []
    i = 0
    while i < len(lines):
        end = lines.index(last, i) if lines[i] == first and last in lines[i:] else -1
        if end < 0:
            rest.append(lines[i])
            i += 1
            continue
        copies.append(tuple(lines[i : end + 1]))
        rest.append(f"<{kind}>")
        i = end + 1
    return copies, rest


def _texts() -> dict[str, str]:
    texts = {q.name: q.sql for q in _raw_statements()}
    texts.update({f"part {name}": sql for name, sql in _raw_parts().items()})
    return texts


def _walks() -> dict[str, str]:
    texts = {q.name: q.sql for q in _raw_statements()} | _raw_parts()
    return {name: m.group(0) for name, sql in texts.items() if (m := _WALK.search(sql))}


def test_region_filter_has_one_marker_and_it_is_valid_sql() -> None:
    for query in load_queries().names():
        sql = load_queries()[query].sql
        others = sql.replace(REGION_MARKER, "")
        assert "region_filter" not in others, f"{query}: a second region-filter syntax"
    marked = [n for n in load_queries().names() if REGION_MARKER in load_queries()[n].sql]
    assert set(marked) >= {
        "worker_claim_skip_locked",
        "worker_claim_candidates",
        "scheduler_cron_due_jobs",
        "scheduler_promote_due",
        "scheduler_reclaim_stuck",
    }
    # As written, the marker is a comment and TRUE: the statement runs unchanged.
    assert strip(REGION_MARKER).split() == ["TRUE"]


def test_no_two_statements_share_a_block_of_sql() -> None:
    seen: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for name, sql in _texts().items():
        lines = _code_lines(sql)
        for kind, (_, _, holders) in WRITTEN_OUT.items():
            if name in holders:
                _, lines = _copies(kind, lines)
                lines = [f"{line} in {name}" if line == f"<{kind}>" else line for line in lines]
        for i in range(len(lines) - WINDOW + 1):
            seen[tuple(lines[i : i + WINDOW])].add(name)
    shared = {block: names for block, names in seen.items() if len(names) > 1}
    assert not shared, "\n\n".join(f"{sorted(n)}:\n" + "\n".join(b) for b, n in shared.items())


def test_the_written_out_copies_agree() -> None:
    """Each fragment written out instead of shared is one text wherever it is written, and
    each holder named holds it."""
    texts = _texts()
    for kind, (_, _, holders) in WRITTEN_OUT.items():
        copies = {name: _copies(kind, _code_lines(texts[name]))[0] for name in sorted(holders)}
        assert all(copies.values()), f"{kind}: no copy in {[n for n, c in copies.items() if not c]}"
        distinct = {copy for found in copies.values() for copy in found}
        assert len(distinct) == 1, f"{kind}: the copies differ: {sorted(distinct)}"


def test_a_written_out_copy_that_drifts_is_found() -> None:
    kind = "the redrive's match"
    first, last, _ = WRITTEN_OUT[kind]
    lines = ["WITH picked AS (", first, "WHERE x.status = 'FAILED'", last]
    copies, rest = _copies(kind, lines)
    assert copies == [tuple(lines[1:])]
    assert rest == ["WITH picked AS (", f"<{kind}>"]
    assert _copies(kind, [*lines[:2], "WHERE x.status = 'QUEUED'", lines[3]])[0] != copies


def test_the_claim_walks_agree() -> None:
    """Each claim's "picked" says what worker.sql's part says: the lock and MATERIALIZED
    only where SKIP LOCKED is the strategy, the heads condition only in the capped claims."""
    walks = _walks()
    assert set(walks) == {
        "worker.sql picked",
        "worker_capped.sql picked",
        "worker_claim_candidates",
        "worker_claim_candidates_capped",
    }

    def core(walk: str) -> list[str]:
        lines = [
            line.strip().removeprefix(", ").removeprefix("WITH ") for line in walk.splitlines()
        ]
        dropped = {
            "FOR UPDATE SKIP LOCKED",
            "AND execution_id = ANY(ARRAY(SELECT execution_id FROM heads))",
        }
        return [line.replace(" MATERIALIZED", "") for line in lines if line not in dropped]

    reference = core(walks["worker.sql picked"])
    for name, walk in walks.items():
        assert core(walk) == reference, name
        assert (
            ("FOR UPDATE SKIP LOCKED" in walk)
            == ("MATERIALIZED" in walk)
            == ("candidates" not in name)
        ), name
        assert ("FROM heads" in walk) == ("capped" in name), name


def test_the_claim_strategies_share_one_take_and_return() -> None:
    registry = load_queries()
    take = "-- include: claimed\n, -- include: claim_rows\nSELECT * FROM claim_rows"
    statements = {q.name: q.sql for q in _raw_statements()}
    for name in (
        "worker_claim_skip_locked",
        "worker_claim_skip_locked_capped",
        "worker_claim_conditional",
        "worker_claim_metered",
    ):
        assert statements[name].endswith(take), name
    # The record-and-claim is the finalize's record, then worker_claim_skip_locked's claim.
    record = statements["worker_finalize_batch"]
    record = record[record.index("WITH\n") : record.index("\nSELECT execution_id,")]
    for suffix in ("", "_capped"):
        claim = statements[f"worker_claim_skip_locked{suffix}"]
        claim = claim[claim.index("WITH\n") + len("WITH\n") : claim.index(take)]
        combined = statements[f"worker_record_and_claim{suffix}"]
        combined = combined[combined.index("WITH\n") :]
        assert combined.startswith(record + "\n, " + claim), suffix
        assert (
            "SELECT * FROM record_and_claim_rows"
            in registry[f"worker_record_and_claim{suffix}"].sql
        )


def test_includes_must_name_a_part_and_every_part_must_be_used() -> None:
    statement = Query(name="q", sql="SELECT 1,\n-- include: missing", source="x.sql")
    try:
        expand_includes([statement], {})
    except ValueError as exc:
        assert "missing" in str(exc)
    else:
        raise AssertionError("an unknown include was accepted")
    try:
        expand_includes([], {"lonely": "SELECT 1"})
    except ValueError as exc:
        assert "lonely" in str(exc)
    else:
        raise AssertionError("an unused part was accepted")


_CITED = re.compile(r"""queries\[["']([a-z_][a-z0-9_]*)["']\]""")


def test_every_query_name_the_code_cites_exists() -> None:
    # Docstrings included: db/queries.py once showed an example with a name that no longer
    # existed (claim_skip_locked).
    names = set(load_queries().names())
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "chalicelib").rglob("*.py"))
        for name in _CITED.findall(path.read_text(encoding="utf-8"))
        if name not in names
    ]
    assert missing == []
