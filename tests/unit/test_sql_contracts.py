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
    parts: dict[str, str] = {}
    for path in sorted(SQL_DIR.glob("*.sql")):
        parts.update(parse_sql_file(path.read_text(encoding="utf-8"), path.name).parts)
    return parts


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
    texts = {q.name: q.sql for q in _raw_statements()}
    texts.update({f"part {name}": sql for name, sql in _raw_parts().items()})
    for name, sql in texts.items():
        lines = [" ".join(line.split()) for line in strip(sql).splitlines() if line.strip()]
        for i in range(len(lines) - WINDOW + 1):
            seen[tuple(lines[i : i + WINDOW])].add(name)
    shared = {block: names for block, names in seen.items() if len(names) > 1}
    assert not shared, "\n\n".join(f"{sorted(n)}:\n" + "\n".join(b) for b, n in shared.items())


def test_the_claim_strategies_share_one_take_and_return() -> None:
    registry = load_queries()
    parts = _raw_parts()
    take, rows = parts["worker_claim_take"], parts["worker_claim_rows"]
    for name in ("worker_claim_skip_locked", "worker_claim_conditional", "worker_claim_metered"):
        assert registry[name].sql.endswith(take + "\n" + rows), name
    # The record-and-claim claims as worker_claim_skip_locked does, after the record.
    combined = registry["worker_record_and_claim"].sql
    skip_locked = registry["worker_claim_skip_locked"].sql
    claim = skip_locked[skip_locked.index("WITH picked AS MATERIALIZED (") + len("WITH ") :]
    assert claim.rstrip().endswith(rows.rstrip())
    claim_without_rows = claim.rstrip()[: -len(rows.rstrip())].rstrip()
    assert claim_without_rows in combined
    record = parts["worker_finalize_record"].replace(
        "-- include: delivery_counts_add", parts["delivery_counts_add"]
    )
    assert record in combined and record in registry["worker_finalize_batch"].sql


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
