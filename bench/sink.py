"""The HTTP sink: nginx on a loopback port answering 200 to every POST.

A real server (not a Python one) so the sink is never the bottleneck. It logs the
receive time ($msec) and the X-Task-Executor-Execution-Id header of each request, which
the latency and precision workloads join against what they sent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from common import WORK, free_port, progress

NGINX_DIR = WORK / "nginx" / str(os.getpid())  # per harness process, like the database
ACCESS_LOG = NGINX_DIR / "access.log"

CONFIG = """\
worker_processes 1;
daemon off;
user root root;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    log_format te '$msec $http_x_task_executor_execution_id $request_method $status';
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        default_type application/json;
        access_log {log} te buffer=256k flush=200ms;
        location / {{ return 200 '{{"ok":true}}'; }}
    }}
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if not found:
        raise SystemExit("nginx is not installed: apt-get install -y nginx-light")
    return found


class Sink:
    """nginx as a child process; ``url`` is where deliveries go."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/sink"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (NGINX_DIR / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        ACCESS_LOG.write_text("")
        conf = NGINX_DIR / "nginx.conf"
        conf.write_text(CONFIG.format(dir=NGINX_DIR, port=self.port, log=ACCESS_LOG))
        self.proc = subprocess.Popen(
            [
                nginx_binary(),
                "-c",
                str(conf),
                "-p",
                str(NGINX_DIR),
                "-e",
                str(NGINX_DIR / "error.log"),
            ]
        )
        for _ in range(100):
            if self._ready():
                progress(f"sink up: nginx at {self.url}")
                return
            time.sleep(0.05)
        raise RuntimeError("nginx did not start; see bench/.work/nginx/error.log")

    def _ready(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(self.url, data=b"{}", timeout=1) as resp:  # noqa: S310
                return resp.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def mark(self) -> int:
        """Current end of the access log (read lines after it with :meth:`read_since`)."""
        time.sleep(0.3)  # the log buffer flushes every 200 ms
        return ACCESS_LOG.stat().st_size

    def read_since(self, offset: int) -> list[tuple[float, str]]:
        """(receive time, execution id) of each POST logged after ``offset``."""
        time.sleep(0.5)
        rows: list[tuple[float, str]] = []
        with ACCESS_LOG.open("rb") as handle:
            handle.seek(offset)
            for raw in handle:
                parts = raw.decode("utf-8", "replace").split()
                if len(parts) >= 3 and parts[2] == "POST":
                    rows.append((float(parts[0]), parts[1]))
        return rows
