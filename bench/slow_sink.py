"""A deliberately slow HTTP target (answers 200 after DELAY seconds) for the memory workload,
so the worker really holds its maximum number of deliveries in flight.

Usage: slow_sink.py PORT DELAY_SECONDS
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web


async def handle(request: web.Request) -> web.Response:
    await request.read()
    await asyncio.sleep(float(sys.argv[2]))
    return web.json_response({"ok": True})


def main() -> None:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
