"""chalicelib/profiles.py, the one table of the profiles' scheduled functions: pure data,
naming the app's functions, agreeing with .chalice/config.json, with settings the service
accepts. (tests/infra/test_profiles.py checks the synthesized templates against it.)"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from chalicelib import profiles
from chalicelib.settings import WORKER_HOSTED_LOOPS, load_settings, split_keys

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_imports_nothing_but_the_standard_library() -> None:
    """infra/ imports it into the CDK app, where the app's packages are not installed."""
    tree = ast.parse((ROOT / "chalicelib" / "profiles.py").read_text())
    modules = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {m.split(".")[0] for m in modules} <= set(sys.stdlib_module_names) | {"__future__"}


def test_full_is_what_chalice_config_deploys() -> None:
    """A plain `chalice deploy` and the CDK's full profile give the same timeouts."""
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    stage = config["stages"]["dev"]["lambda_functions"]
    full = profiles.PROFILES["full"]
    assert {name: stage[name]["lambda_timeout"] for name in full} == {
        name: function.timeout_sec for name, function in full.items()
    }


def test_the_table_names_the_apps_scheduled_functions() -> None:
    import app as app_module
    from chalicelib.wiring.lambdas import SCHEDULER_LOOPS

    scheduled = {
        source.name
        for source in app_module.app.event_sources
        if hasattr(source, "schedule_expression")
    }
    assert scheduled == set(profiles.SCHEDULED_FUNCTIONS)
    assert set(SCHEDULER_LOOPS) == set(profiles.SCHEDULER_FUNCTIONS)
    for table in profiles.PROFILES.values():
        assert tuple(table) == profiles.SCHEDULED_FUNCTIONS
        assert all(function.name == name for name, function in table.items())


def test_every_override_is_a_setting_the_service_accepts() -> None:
    for table in profiles.PROFILES.values():
        for function in table.values():
            load_settings(dict(function.env))  # raises on an unknown value
    lean_worker = load_settings(dict(profiles.PROFILES["lean"]["run_worker"].env))
    assert set(split_keys(lean_worker.worker_scheduler_loops)) == set(WORKER_HOSTED_LOOPS)


def test_lean_scheduler_passes_look_past_the_next_minute_and_its_worker_claims_it() -> None:
    lean = profiles.PROFILES["lean"]
    cron = load_settings(dict(lean["materialize_cron_ticks"].env))
    promote = load_settings(dict(lean["promote_delayed_executions"].env))
    assert cron.cron_tick_interval_sec == promote.promote_interval_ms / 1000 == 75
    assert {lean[name].timeout_sec for name in profiles.SCHEDULER_FUNCTIONS} == {10}
    assert lean["run_worker"].timeout_sec == 80
    assert not lean["reclaim_stuck_executions"].env


def test_a_function_s_overrides_cannot_be_changed_through_the_table() -> None:
    env = profiles.PROFILES["lean"]["run_worker"].env
    with pytest.raises(TypeError):
        env["TE_WORKER_SCHEDULER_LOOPS"] = ""  # type: ignore[index]
    assert env["TE_WORKER_SCHEDULER_LOOPS"] == profiles.HOSTED_SCHEDULER_LOOPS
