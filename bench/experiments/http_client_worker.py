"""Launch ``python -m chalicelib.worker`` with the HTTP client named in argv[1].

Only for the A/B in ``http_client_ab.py``: ``wire`` runs the worker as it is, ``aiohttp``
swaps the dispatcher's client class for :class:`aiohttp_client.AiohttpClient` (same
interface) before the worker starts. Nothing else differs between the two workers.
"""

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

if sys.argv[1] == "aiohttp":
    from aiohttp_client import AiohttpClient

    import chalicelib.worker.dispatchers.http as http

    http.HttpClient = AiohttpClient  # type: ignore[misc,assignment]
elif sys.argv[1] != "wire":
    raise SystemExit(f"unknown client {sys.argv[1]!r}")
del sys.argv[1]
runpy.run_module("chalicelib.worker", run_name="__main__", alter_sys=True)
