"""``python -m chalicelib.migrate``: apply pending migrations (the deployment step).

The command line over :func:`chalicelib.db.migrate.migrate`. It lives beside the other entry
points, not in ``db/``: it resolves the database through :mod:`chalicelib.wiring`
(``TE_DATABASE_URL``, its Secrets Manager ARN, or in local mode the embedded database),
and ``db/`` knows neither wiring nor settings.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.migrate",
        description="Apply pending forward-only migrations to the database.",
    )
    parser.add_argument("--database-url", help="default: TE_DATABASE_URL or the embedded DB")
    args = parser.parse_args(argv)
    from chalicelib import wiring
    from chalicelib.db.connection import Database
    from chalicelib.db.migrate import migrate

    wiring.configure_logging()
    db = Database.from_url(args.database_url) if args.database_url else wiring.database("cli")
    applied = migrate(db)
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
