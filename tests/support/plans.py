"""Run a named statement as the service does (a prepared statement) under EXPLAIN ANALYZE,
with the plan PostgreSQL picks by default and with the generic plan a prepared statement
switches to after five runs, and count the rows each plan node read.

A plan is judged by rows, never by time: every scan of a table counts the rows it returned
plus the rows its filter removed, in every loop. A statement bounded by its page reads a
few pages whatever the history; one that walks the history reads it.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pg8000.native

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import Query

#: default: the plan a prepared statement gets for its first runs (custom, for the values);
#: generic: the one it may keep after five runs on a connection, made without the values.
MODES = ("auto", "force_generic_plan")


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, list | tuple):
        return "'{" + ",".join(str(v) for v in value) + "}'"
    return "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True)
class Plan:
    """One EXPLAIN ANALYZE of a prepared statement."""

    root: dict[str, Any]
    mode: str

    def read(self) -> Counter[str]:
        """Rows read per table: returned plus removed by a filter or recheck, all loops."""
        counts: Counter[str] = Counter()
        for node in nodes(self.root):
            relation = node.get("Relation Name")
            if relation is None:
                continue
            per_loop = (
                node.get("Actual Rows", 0)
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
            counts[relation] += per_loop * node.get("Actual Loops", 1)
        return counts

    def seq_scanned(self) -> set[str]:
        return {n["Relation Name"] for n in nodes(self.root) if n["Node Type"] == "Seq Scan"}

    def indexes(self) -> set[str]:
        return {n["Index Name"] for n in nodes(self.root) if "Index Name" in n}

    def __str__(self) -> str:
        """The plan as an indented outline: node, table and index, rows read per loop."""
        lines = [f"{self.mode} plan:"]

        def walk(node: dict[str, Any], depth: int) -> None:
            where = " ".join(
                str(node[k]) for k in ("Relation Name", "Index Name", "Index Cond") if k in node
            )
            rows = node.get("Actual Rows", 0)
            removed = node.get("Rows Removed by Filter", 0)
            loops = node.get("Actual Loops", 1)
            lines.append(
                f"{'  ' * depth}{node['Node Type']} {where} rows={rows} removed={removed}"
                f" loops={loops} filter={node.get('Filter', '')}"
            )
            for child in node.get("Plans", []):
                walk(child, depth + 1)

        walk(self.root, 1)
        return "\n".join(lines)


def analyze(database: Database, query: Query, params: Mapping[str, Any], mode: str) -> Plan:
    """``query`` prepared and executed once with ``params`` under ``plan_cache_mode``."""
    sql, make_vals = pg8000.native.to_statement(query.sql)
    values = make_vals(dict(params))
    name = "probe_" + uuid.uuid4().hex[:12]

    def work(tx: Transaction) -> Any:
        tx.run(f"SET LOCAL plan_cache_mode = {mode}")
        tx.run(f"PREPARE {name} AS {sql}")
        args = f"({', '.join(_literal(v) for v in values)})" if values else ""
        row = tx.run(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}{args}")[0]
        tx.run(f"DEALLOCATE {name}")
        return next(iter(row.values()))

    document = database.transaction(work)
    parsed = json.loads(document) if isinstance(document, str) else document
    return Plan(parsed[0]["Plan"], mode)


def bounded(
    database: Database,
    query: Query,
    params: Mapping[str, Any],
    *,
    at_most: int,
    tables: tuple[str, ...] = ("executions", "jobs", "attempts"),
) -> list[Plan]:
    """Both plans of ``query``, after checking that each reads no table sequentially and
    at most ``at_most`` rows of each of ``tables``."""
    plans = []
    for mode in MODES:
        plan = analyze(database, query, params, mode)
        assert not plan.seq_scanned() & set(tables), f"{query.name}\n{query.sql}\n{plan}"
        read = plan.read()
        over = {t: read[t] for t in tables if read[t] > at_most}
        assert not over, f"{query.name} read {over} (at most {at_most})\n{query.sql}\n{plan}"
        plans.append(plan)
    return plans


def metered_claim_params(database: Database, endpoint: str, batch: int) -> dict[str, Any]:
    """``endpoint`` put under a concurrency limit (so worker_claim_metered takes it) and the
    statement's parameters for a claim of ``batch`` by one worker holding nothing."""
    database.run(
        "UPDATE endpoints SET flow_control = CAST(:flow AS JSONB) WHERE name = :e",
        flow=json.dumps({"max_concurrency": 1000}),
        e=endpoint,
    )
    database.run("INSERT INTO endpoint_flow (endpoint) VALUES (:e)", e=endpoint)
    database.run("ANALYZE")
    return {
        "names": [endpoint],
        "allow": json.dumps({}),
        "batch": batch,
        "worker_id": "w1",
        "lease_ms": 300_000,
        "default_cap": batch * 10,
        "busy": json.dumps({}),
        "pending": 0,
    }
