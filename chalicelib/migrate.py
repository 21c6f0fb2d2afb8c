"""``python -m chalicelib.migrate``: apply pending migrations (the deployment step), and the
operator's bootstrap of the first API key.

The command line over :func:`chalicelib.db.migrate.migrate`. It lives beside the other entry
points, not in ``db/``: it resolves the database through the composition root's
:class:`~chalicelib.wiring.process.ProcessRoot`
(``TE_DATABASE_URL``, its Secrets Manager ARN, or in local mode the embedded database),
and ``db/`` knows neither wiring nor settings. (``python -m chalicelib.db.migrate`` runs
this same command.)

``--first-admin-key NAME`` then creates an ``admin`` API key and prints it once, only while
the database holds no active admin key: the way to the first key on a fresh database, where
no key can call ``POST /keys`` yet. Every other key is made over the API (``te keys
create``), by an admin key. It needs database access, as migrating does.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.db.connection import Database

#: Exit status when --first-admin-key finds an active admin key (nothing is created).
ADMIN_KEY_EXISTS = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.migrate",
        description="Apply pending forward-only migrations to the database.",
    )
    parser.add_argument("--database-url", help="default: TE_DATABASE_URL or the embedded DB")
    parser.add_argument(
        "--first-admin-key",
        metavar="NAME",
        help="then create an admin API key labelled NAME and print it once, only if the "
        "database has no active admin key (a fresh database's first key)",
    )
    args = parser.parse_args(argv)
    from chalicelib.db.connection import Database
    from chalicelib.db.migrate import migrate
    from chalicelib.wiring.process import ProcessRoot

    process = ProcessRoot()
    process.configure_logging()
    db = Database.from_url(args.database_url) if args.database_url else process.database("cli")
    applied = migrate(db)
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}")
    if args.first_admin_key is None:
        return 0
    return _first_admin_key(db, args.first_admin_key)


def _first_admin_key(db: Database, name: str) -> int:
    from chalicelib.errors import TaskExecutorError
    from chalicelib.services.api_keys import ApiKeyService

    try:
        created = ApiKeyService(db).create_first_admin(name)
    except TaskExecutorError as exc:  # a name the rules refuse
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if created is None:
        print(
            "error: an active admin key exists; create more keys with it over the API "
            "(te keys create NAME --scope SCOPE)",
            file=sys.stderr,
        )
        return ADMIN_KEY_EXISTS
    print(f"key_id: {created.key_id}")
    print(f"api_key: {created.key}")
    print("Store the key now: it is not shown again.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
