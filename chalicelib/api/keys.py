"""API keys from the command line; the plaintext key is printed once and never stored.

    python -m chalicelib.api.keys create <name>    # prints key_id and the key
    python -m chalicelib.api.keys revoke <key_id>  # the key stops working

Uses ``TE_DATABASE_URL`` (or the embedded database in local mode) like the API. Running
API processes honour a revocation within ``TE_API_KEY_CACHE_TTL_SEC`` (default 5 s).
"""

from __future__ import annotations

import argparse
import sys

from chalicelib import services


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

    keys = services.api_key_service()
    if args.command == "create":
        created = keys.create(args.name)
        print(f"key_id: {created.key_id}")
        print(f"api_key: {created.key}")
        print("Store the key now: it is not shown again.", file=sys.stderr)
        return 0
    if keys.revoke(args.key_id):
        print(f"revoked {args.key_id}")
        return 0
    print(f"no active key with id {args.key_id}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
