"""Nothing leaves loopback: the guard of the host-mode LocalStack and every function it runs.

Installed by ``sitecustomize`` (this directory on ``PYTHONPATH``) into the LocalStack process
and every Python process it starts, and by the host Lambda executor's bootstrap into each
function (which runs with ``-I -S``, so it imports this module itself). Standard library
only: it runs under LocalStack's Python and under each function's.

It decides before any system call, so a refused attempt sends nothing:

* ``connect``/``connect_ex``/``sendto``/``sendmsg``/``bind`` on an IPv4 or IPv6 socket take
  an address in 127.0.0.0/8 or ``::1`` only (``bind`` also refuses the wildcard address: a
  listener on every interface could answer from outside);
* name lookups (``getaddrinfo``, ``gethostbyname``, ...) take IP literals and the names that
  resolve without DNS to loopback: ``localhost``, the loopback names of ``/etc/hosts``, and
  ``localhost.localstack.cloud`` with its subdomains (LocalStack's own name, whose public
  record is 127.0.0.1; answered here without asking a resolver). Any other name would send
  a query to the resolver, so it is refused unresolved.

A refusal raises :class:`NonLoopbackRefused` (an ``OSError``, ``EHOSTUNREACH``), says so on
stderr, and appends one JSON line to the file ``TE_LOOPBACK_GUARD_REPORT`` names (what,
where, which process and function), so a test sees attempts that the code swallowed.
Sockets opened by C code of their own (none of the services this repository uses) are
outside its reach.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

#: Where refusals are appended as JSON lines (unset: stderr only).
REPORT_ENV = "TE_LOOPBACK_GUARD_REPORT"
#: Names LocalStack gives itself; their public DNS record is 127.0.0.1.
LOCALSTACK_DOMAIN = "localhost.localstack.cloud"
HOSTS_FILE = "/etc/hosts"
INET_FAMILIES = (socket.AF_INET, socket.AF_INET6)

_lock = threading.Lock()
_installed: dict[str, Any] = {}


class NonLoopbackRefused(OSError):
    """An attempt to reach (or listen) outside loopback; nothing was sent."""


def is_loopback_address(host: object) -> bool:
    """``host`` is an IP literal in 127.0.0.0/8 or ``::1`` (an IPv4-mapped one counts)."""
    try:
        address = ipaddress.ip_address(str(host).strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def is_ip_literal(host: object) -> bool:
    """``host`` is an IPv4 or IPv6 address, not a name."""
    try:
        ipaddress.ip_address(str(host).strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def loopback_names(hosts_text: str) -> frozenset[str]:
    """The names a hosts file maps to a loopback address (resolved without DNS)."""
    names: set[str] = set()
    for line in hosts_text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and is_loopback_address(fields[0]):
            names.update(name.lower() for name in fields[1:])
    return frozenset(names)


def _read_hosts() -> frozenset[str]:
    try:
        with open(HOSTS_FILE, encoding="utf-8") as hosts:
            return loopback_names(hosts.read())
    except OSError:
        return frozenset()


def is_local_name(name: str, hosts: Iterable[str] = ()) -> bool:
    """``name`` resolves to loopback without asking a resolver."""
    lowered = name.lower().rstrip(".")
    return (
        lowered == "localhost"
        or lowered.endswith(".localhost")
        or lowered == LOCALSTACK_DOMAIN
        or lowered.endswith("." + LOCALSTACK_DOMAIN)
        or lowered in hosts
    )


def decide_destination(host: object, *, hosts: Iterable[str] = (), listen: bool = False) -> str:
    """Why ``host`` is refused as a destination (or a bind address), or "" when allowed.

    The one decision every patched call makes; pure, so it is tested without a socket.
    """
    text = host.decode() if isinstance(host, bytes) else str(host)
    if text in ("", "0.0.0.0", "::", "<broadcast>"):
        return "" if not text and not listen else f"{text or 'any address'} is not loopback"
    if is_ip_literal(text):
        return "" if is_loopback_address(text) else f"{text} is outside 127.0.0.0/8 and ::1"
    if is_local_name(text, hosts):
        return ""
    return f"{text!r} is a name that needs DNS (only loopback names resolve here)"


class _Guard:
    """The patched calls; ``report`` is where refusals go besides the exception."""

    def __init__(self, hosts: frozenset[str], report: str | None) -> None:
        self.hosts = hosts
        self.report = report

    def refuse(self, what: str, target: object, reason: str) -> NonLoopbackRefused:
        line = {
            "what": what,
            "target": repr(target),
            "reason": reason,
            "pid": os.getpid(),
            "process": os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "python"),
            "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
            "at": time.time(),
        }
        print(f"loopback guard: refused {what} {target!r}: {reason}", file=sys.stderr)
        if self.report:
            with _lock, open(self.report, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
        return NonLoopbackRefused(
            errno.EHOSTUNREACH, f"loopback guard refused {what} {target!r}: {reason}"
        )

    def check_socket(self, sock: socket.socket, what: str, address: Any) -> None:
        if sock.family not in INET_FAMILIES or not isinstance(address, tuple):
            return
        reason = decide_destination(address[0], hosts=self.hosts, listen=what == "bind")
        if reason:
            raise self.refuse(what, address, reason)

    def check_name(self, what: str, name: object) -> None:
        if name is None:
            return
        reason = decide_destination(name, hosts=self.hosts)
        if reason:
            raise self.refuse(what, name, reason)


def _local_answer(name: object) -> str | None:
    """``localhost.localstack.cloud`` (and subdomains) without a resolver: 127.0.0.1."""
    text = name.decode() if isinstance(name, bytes) else str(name)
    lowered = text.lower().rstrip(".")
    if lowered == LOCALSTACK_DOMAIN or lowered.endswith("." + LOCALSTACK_DOMAIN):
        return "127.0.0.1"
    return None


def _patch_socket_methods(guard: _Guard) -> None:
    real = {name: getattr(socket.socket, name) for name in _SOCKET_METHODS}
    _installed.update({f"socket.{name}": method for name, method in real.items()})

    def connect(sock: socket.socket, address: Any) -> None:
        guard.check_socket(sock, "connect", address)
        real["connect"](sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        guard.check_socket(sock, "connect", address)
        return int(real["connect_ex"](sock, address))

    def bind(sock: socket.socket, address: Any) -> None:
        guard.check_socket(sock, "bind", address)
        real["bind"](sock, address)

    def sendto(sock: socket.socket, data: Any, *rest: Any) -> int:
        guard.check_socket(sock, "sendto", rest[-1])
        return int(real["sendto"](sock, data, *rest))

    def sendmsg(sock: socket.socket, buffers: Any, *rest: Any) -> int:
        if len(rest) >= 3 and rest[2] is not None:
            guard.check_socket(sock, "sendmsg", rest[2])
        return int(real["sendmsg"](sock, buffers, *rest))

    patched = {
        "connect": connect,
        "connect_ex": connect_ex,
        "bind": bind,
        "sendto": sendto,
        "sendmsg": sendmsg,
    }
    for name, method in patched.items():
        setattr(socket.socket, name, method)


_SOCKET_METHODS = ("connect", "connect_ex", "bind", "sendto", "sendmsg")


def _patch_lookups(guard: _Guard) -> None:
    real_getaddrinfo: Callable[..., Any] = socket.getaddrinfo
    real_by_name: Callable[..., Any] = socket.gethostbyname
    real_by_name_ex: Callable[..., Any] = socket.gethostbyname_ex
    real_by_addr: Callable[..., Any] = socket.gethostbyaddr
    _installed.update(
        getaddrinfo=real_getaddrinfo,
        gethostbyname=real_by_name,
        gethostbyname_ex=real_by_name_ex,
        gethostbyaddr=real_by_addr,
    )

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        guard.check_name("lookup", host)
        return real_getaddrinfo(_local_answer(host) or host, *args, **kwargs)

    def gethostbyname(name: str) -> str:
        guard.check_name("lookup", name)
        return str(real_by_name(_local_answer(name) or name))

    def gethostbyname_ex(name: str) -> Any:
        guard.check_name("lookup", name)
        return real_by_name_ex(_local_answer(name) or name)

    def gethostbyaddr(address: str) -> Any:
        guard.check_name("reverse lookup", address)
        return real_by_addr(address)

    socket.getaddrinfo = getaddrinfo
    socket.gethostbyname = gethostbyname
    socket.gethostbyname_ex = gethostbyname_ex
    socket.gethostbyaddr = gethostbyaddr


def install(report: str | None = None) -> None:
    """Patch this process's socket module (once); ``report``: the JSON-lines file."""
    if _installed:
        return
    guard = _Guard(_read_hosts(), report if report is not None else os.environ.get(REPORT_ENV))
    _patch_socket_methods(guard)
    _patch_lookups(guard)


def installed() -> bool:
    """The guard is active in this process."""
    return bool(_installed)
