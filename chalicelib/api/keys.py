"""API keys from the command line; the plaintext key is printed once and never stored.

    python -m chalicelib.api.keys create <name>    # prints key_id and the key
    python -m chalicelib.api.keys revoke <key_id>  # the key stops working

Uses ``TE_DATABASE_URL`` (or the embedded database in local mode) like the API. Running
API processes honour a revocation within ``TE_API_KEY_CACHE_TTL_SEC`` (default 5 s).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from chalicelib.api.auth import generate_key, hash_key
from chalicelib.db.connection import Database
from chalicelib.db.queries import queries


@dataclass(frozen=True)
class CreatedKey:
    """A new key: its id (for revocation) and the plaintext (shown once)."""

    key_id: str
    name: str
    key: str


def create_key(db: Database, name: str) -> CreatedKey:
    """Store the hash of a new random key labelled ``name``; return the plaintext once."""
    if not name.strip():
        raise ValueError("a key needs a non-empty name")
    key = generate_key()
    rows = db.run(queries["api_key_insert"], name=name, key_hash=hash_key(key))
    return CreatedKey(key_id=str(rows[0]["key_id"]), name=name, key=key)


def revoke_key(db: Database, key_id: str) -> bool:
    """Revoke a key; False if no active key has this id."""
    return db.execute(queries["api_key_revoke"], key_id=key_id) > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chalicelib.api.keys",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("create", help="create a key").add_argument("name")
    commands.add_parser("revoke", help="revoke a key").add_argument("key_id")
    args = parser.parse_args(argv)

    from chalicelib import wiring

    db = wiring.database("api")
    if args.command == "create":
        created = create_key(db, args.name)
        print(f"key_id: {created.key_id}")
        print(f"api_key: {created.key}")
        print("Store the key now: it is not shown again.", file=sys.stderr)
        return 0
    if revoke_key(db, args.key_id):
        print(f"revoked {args.key_id}")
        return 0
    print(f"no active key with id {args.key_id}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
