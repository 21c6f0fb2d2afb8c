"""API keys over the API, with scopes: the key routes (admin only), what each scope may call
(walked over every route the app serves), the migration that made existing keys admin, and
the operator's first-key bootstrap and migrate command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import app as app_module
from chalicelib.api import PUBLIC_ROUTES
from chalicelib.db.connection import Database
from chalicelib.db.migrate import MIGRATIONS_DIR, migrate
from chalicelib.domain.api_keys import hash_key
from chalicelib.migrate import ADMIN_KEY_EXISTS
from chalicelib.migrate import main as migrate_main
from tests.integration.test_api_foundation import assert_envelope
from tests.support.api_client import ApiClient

ROOT = Path(__file__).resolve().parents[2]
READ_METHODS = {"GET", "HEAD", "OPTIONS"}


def keyed_routes() -> list[tuple[str, str, str]]:
    """(METHOD, route template, concrete path) of every route that needs a key."""
    routes = []
    for template, entries in app_module.app.routes.items():
        for method in entries:
            if (method, template) not in PUBLIC_ROUTES:
                concrete = re.sub(r"\{[^}]+\}", "dummy-1", template)
                routes.append((method, template, concrete))
    return sorted(routes)


def is_key_route(template: str) -> bool:
    return template == "/keys" or template.startswith("/keys/")


def make_key(api: ApiClient, name: str, scope: str) -> str:
    reply = api.post("/keys", {"name": name, "scope": scope})
    assert reply.status == 201, reply.body
    return str(reply.body["api_key"])


@pytest.fixture
def uncached(api: ApiClient, monkeypatch: pytest.MonkeyPatch) -> ApiClient:
    """The API with no key cache, so a revocation is seen by the next request."""
    monkeypatch.setenv("TE_API_KEY_CACHE_TTL_SEC", "0")
    api.restart()
    return api


def test_an_admin_key_creates_lists_and_revokes_keys(uncached: ApiClient) -> None:
    api = uncached
    created = api.post("/keys", {"name": "ci deploys", "scope": "write"})
    assert created.status == 201
    body = created.body
    assert set(body) == {"key_id", "name", "scope", "created_at", "revoked_at", "api_key"}
    assert body["key_id"].startswith("key_") and body["api_key"].startswith("te_")
    assert (body["name"], body["scope"], body["revoked_at"]) == ("ci deploys", "write", None)

    listed = api.get("/keys")
    assert listed.status == 200 and listed.body["cursor"] is None
    [item] = listed.body["items"]
    assert item == {k: v for k, v in body.items() if k != "api_key"}
    text = str(listed.body)
    assert body["api_key"] not in text and hash_key(body["api_key"]).hex() not in text

    admin_key = api.key
    api.key = body["api_key"]
    assert api.get("/jobs").status == 200
    api.key = admin_key
    revoked = api.post(f"/keys/{body['key_id']}/revoke")
    assert revoked.status == 200 and revoked.body["revoked_at"] is not None
    assert "api_key" not in revoked.body
    again = api.post(f"/keys/{body['key_id']}/revoke")
    assert again.status == 200 and again.body["revoked_at"] == revoked.body["revoked_at"]
    assert api.get("/keys").body["items"][0]["revoked_at"] == revoked.body["revoked_at"]
    api.key = body["api_key"]
    assert_envelope(api.get("/jobs"), 401, "UNAUTHORIZED")


def test_keys_page_by_cursor_newest_first(api: ApiClient) -> None:
    for n in range(3):
        make_key(api, f"k{n}", "read")
    first = api.get("/keys?limit=2").body
    rest = api.get(f"/keys?limit=2&cursor={first['cursor']}").body
    names = [k["name"] for k in first["items"] + rest["items"]]
    assert names == ["k2", "k1", "k0"] and rest["cursor"] is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "x"}, "Missing required field(s): scope"),
        ({"scope": "read"}, "Missing required field(s): name"),
        ({"name": "x", "scope": "root"}, "must be one of: read, write, admin"),
        ({"name": "x", "scope": "READ"}, "must be one of"),
        ({"name": "", "scope": "read"}, "non-empty"),
        ({"name": "x" * 101, "scope": "read"}, "at most 100"),
        ({"name": "a\nb", "scope": "read"}, "control characters"),
        ({"name": 5, "scope": "read"}, "non-empty string"),
        ({"name": "x", "scope": "read", "expires": 1}, "Unknown field(s): expires"),
    ],
)
def test_a_bad_create_is_a_400_and_writes_nothing(
    api: ApiClient, body: dict[str, Any], message: str
) -> None:
    reply = api.post("/keys", body)
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert message in reply.body["error"]["message"]
    assert api.get("/keys").body["items"] == []


def test_revoking_an_unknown_key_is_a_404(api: ApiClient) -> None:
    assert_envelope(api.post("/keys/key_missing/revoke"), 404, "API_KEY_NOT_FOUND")


def test_a_read_key_is_refused_every_mutating_route_and_served_every_read(
    api: ApiClient,
) -> None:
    """Walks every route the app serves: whatever its path, a method that is not a read is
    403 INSUFFICIENT_SCOPE for a read key (before the view runs), key administration too,
    and every GET reaches its view (which may answer 404 for the dummy id, never 401/403)."""
    api.key = make_key(api, "reader", "read")
    routes = keyed_routes()
    assert any(method == "POST" for method, _, _ in routes)
    for method, template, path in routes:
        reply = api.request(method, path, {} if method in ("POST", "PUT") else None)
        if method in READ_METHODS and not is_key_route(template):
            assert reply.status not in (401, 403), (method, template, reply.body)
        else:
            assert_envelope(reply, 403, "INSUFFICIENT_SCOPE")
            assert "'read'" in reply.body["error"]["message"], (method, template)


def test_a_write_key_is_refused_the_key_routes_and_only_those(api: ApiClient) -> None:
    api.key = make_key(api, "writer", "write")
    key_routes = [r for r in keyed_routes() if is_key_route(r[1])]
    assert {(m, t) for m, t, _ in key_routes} >= {
        ("GET", "/keys"),
        ("POST", "/keys"),
        ("POST", "/keys/{key_id}/revoke"),
    }
    for method, template, path in keyed_routes():
        reply = api.request(method, path, {} if method in ("POST", "PUT") else None)
        if is_key_route(template):
            assert_envelope(reply, 403, "INSUFFICIENT_SCOPE")
            assert "needs a 'admin' key" in reply.body["error"]["message"]
        else:
            assert reply.status not in (401, 403), (method, template, reply.body)


def test_a_read_key_opens_the_dashboard_and_scrapes_metrics(api: ApiClient) -> None:
    api.key = make_key(api, "grafana", "read")
    assert api.get("/ui").status == 200
    assert api.get("/overview").status == 200
    assert api.get("/metrics").status == 200
    assert api.get("/jobs").status == 200


def test_an_admin_key_made_over_the_api_manages_keys(api: ApiClient) -> None:
    api.key = make_key(api, "second admin", "admin")
    assert api.post("/keys", {"name": "made by the second", "scope": "read"}).status == 201
    assert len(api.get("/keys").body["items"]) == 2


def test_keys_that_existed_before_the_scope_migration_become_admin(
    pg_server: Any, tmp_path: Path
) -> None:
    """Every key could do everything before: after 015 it still can (scope admin)."""
    admin = pg_server.admin()
    name = "te_scopes_upgrade"
    admin.run(f"DROP DATABASE IF EXISTS {name}")
    admin.run(f"CREATE DATABASE {name}")
    admin.close()
    try:
        db = Database.from_url(pg_server.url(name), pool_size=1)
        for path in MIGRATIONS_DIR.glob("*.sql"):
            if path.name < "015":
                shutil.copy(path, tmp_path / path.name)
        migrate(db, tmp_path)
        db.run("INSERT INTO api_keys (name, key_hash) VALUES ('old', :h)", h=hash_key("te_old"))
        assert "015" in migrate(db)
        rows = db.run("SELECT name, scope FROM api_keys")
        assert [(r["name"], r["scope"]) for r in rows] == [("old", "admin")]
        db.close()
    finally:
        admin = pg_server.admin()
        admin.run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def test_the_first_admin_key_is_made_once_by_the_operator(
    api: ApiClient, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert migrate_main(["--database-url", db_url, "--first-admin-key", "ops"]) == 0
    out = capsys.readouterr().out
    key = re.search(r"api_key: (te_\S+)", out)
    assert key and re.search(r"key_id: key_\S+", out)
    api.key = key.group(1)
    listed = api.get("/keys").body["items"]
    assert [(k["name"], k["scope"]) for k in listed] == [("ops", "admin")]

    assert migrate_main(["--database-url", db_url, "--first-admin-key", "ops2"]) == (
        ADMIN_KEY_EXISTS
    )
    captured = capsys.readouterr()
    assert "te_" not in captured.out and "active admin key exists" in captured.err
    assert len(api.get("/keys").body["items"]) == 1


@pytest.mark.parametrize("module", ["chalicelib.migrate", "chalicelib.db.migrate"])
def test_both_migrate_module_names_run_the_one_migrate_command(module: str, db_url: str) -> None:
    """``python -m chalicelib.db.migrate`` used to exit 0 having done nothing."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--database-url", db_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "applied 0 migration(s): none pending"
    usage = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert usage.returncode == 0 and "--first-admin-key" in usage.stdout


def test_the_old_key_command_says_where_key_administration_went() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chalicelib.api.keys", "create", "ci"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "te keys create" in done.stderr and "--first-admin-key" in done.stderr
