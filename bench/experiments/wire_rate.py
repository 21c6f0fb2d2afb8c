"""POST rate and CPU per request: the asyncio wire client vs. urllib3 on threads, same nginx.

Both sides send the same small JSON POST with delivery-like headers to nginx (one worker,
``return 200``) on a loopback port, N requests with 50 in flight: 50 tasks on one event
loop through :class:`HttpClient`, then 50 threads sharing one urllib3 HTTPConnectionPool.
CPU is this process's ``time.process_time`` (nginx runs in its own processes).

Usage (project venv): python bench/experiments/wire_rate.py [N] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import urllib3

from chalicelib.worker.dispatchers.wire import HttpClient, Origin

CONCURRENCY = 50
BODY = b'{"event":"tick","job":"6f1c2a4e","attempt":1,"payload":{"n":42,"tags":["a","b"]}}'
HEADERS = [
    ("Host", "127.0.0.1"),
    ("User-Agent", "task-executor/0.1"),
    ("Content-Type", "application/json"),
    ("Idempotency-Key", "0b7e6f1e-6c2a-4d1f-9a55-3f0b2a9c1d77"),
    ("X-Task-Executor-Execution-Id", "0b7e6f1e-6c2a-4d1f-9a55-3f0b2a9c1d77"),
    ("X-Task-Executor-Attempt", "1"),
]

CONFIG = """\
worker_processes 1;
daemon off;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def nginx() -> Iterator[int]:
    """nginx on a free loopback port, configured and logging inside a temp dir."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise SystemExit("nginx is not installed")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="wire-rate-") as folder:
        # nginx drops to "nobody" when started as root; this temp dir is root's.
        user = "user root root;" if os.geteuid() == 0 else ""
        conf = Path(folder) / "nginx.conf"
        conf.write_text(CONFIG.format(dir=folder, port=port, user=user))
        proc = subprocess.Popen(
            [binary, "-c", str(conf), "-p", folder, "-e", f"{folder}/error.log"]
        )
        try:
            _wait_ready(port)
            yield port
        finally:
            proc.send_signal(signal.SIGQUIT)
            proc.wait(timeout=10)


def _wait_ready(port: int) -> None:
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nginx did not start")


def measure(name: str, run: Callable[[], None], n: int) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    result = {"per_s": n / wall, "cpu_us": cpu / n * 1e6}
    print(f"  {name:8} {result['per_s']:8.0f} req/s  {result['cpu_us']:6.1f} µs CPU/request")
    return result


def wire_run(port: int, n: int) -> None:
    async def main() -> None:
        client = HttpClient(max_idle_per_origin=CONCURRENCY)
        origin = Origin("http", "127.0.0.1", port, "127.0.0.1")
        left = iter(range(n))

        async def sender() -> None:
            for _ in left:
                response = await client.request(
                    origin, "POST", "/hook", HEADERS, BODY, timeout=10, body_limit=4096
                )
                if response.status != 200:
                    raise RuntimeError(response.status)

        try:
            await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        finally:
            await client.close()

    asyncio.run(main())


def urllib3_run(port: int, n: int) -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=CONCURRENCY, block=False)
    headers = dict(HEADERS)
    timeout = urllib3.Timeout(total=10)
    left = iter(range(n))
    lock = threading.Lock()

    def sender() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            response = pool.urlopen(
                "POST", "/hook", body=BODY, headers=headers, timeout=timeout,
                retries=False, redirect=False, preload_content=False,
            )  # fmt: skip
            response.read(4097)
            response.release_conn()
            if response.status != 200:
                raise RuntimeError(response.status)

    threads = [threading.Thread(target=sender) for _ in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pool.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runs: dict[str, list[dict[str, float]]] = {"wire": [], "urllib3": []}
    with nginx() as port:
        wire_run(port, 2_000)  # warm-up: nginx, imports, page cache
        urllib3_run(port, 2_000)
        for index in range(rounds):
            print(f"round {index + 1}: {n} POSTs, {CONCURRENCY} in flight")
            runs["wire"].append(measure("wire", lambda: wire_run(port, n), n))
            runs["urllib3"].append(measure("urllib3", lambda: urllib3_run(port, n), n))
    print("median over rounds:")
    for name, items in runs.items():
        rate = statistics.median(r["per_s"] for r in items)
        cpu = statistics.median(r["cpu_us"] for r in items)
        print(f"  {name:8} {rate:8.0f} req/s  {cpu:6.1f} µs CPU/request")
    wire, base = runs["wire"], runs["urllib3"]
    ratio = statistics.median(w["per_s"] / b["per_s"] for w, b in zip(wire, base, strict=True))
    print(f"  rate ratio wire/urllib3 (median of paired rounds): {ratio:.2f}")


if __name__ == "__main__":
    main()
