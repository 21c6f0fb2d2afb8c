"""Local mode's data directory and generated keys (``make run``, ``chalice local``; never AWS).

The default data directory ``./.te-data`` is created as a *link* to a directory outside the
project: ``$XDG_STATE_HOME/task-executor/<project>-<hash>`` (``~/.local/state`` by default,
``/var/lib`` for root, whose home the embedded PostgreSQL's OS user could not traverse).
``chalice local``'s auto-reloader restarts the server on any change to a file under the
project, and it walks no linked directory, so the database's writes there never trigger it.
A ``.te-data`` that already exists (a real directory from an older checkout, or a link) and
an explicit ``TE_DATA_DIR`` are used as they are.

The keys local mode generates (the bootstrap API key, the secret encryption key) are created
once in that directory, with mode 0600, and reused by every later run and every process
(``make run``, ``chalice local``, ``python -m chalicelib.local --no-api``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = "./.te-data"  # Settings.data_dir's default
API_KEY_FILE = "api-key"
ENCRYPTION_KEY_FILE = "secret-encryption.key"


def state_home() -> Path:
    """Where per-user application state lives (XDG base directories)."""
    configured = os.environ.get("XDG_STATE_HOME")
    if configured:
        return Path(configured)
    if os.geteuid() == 0:
        return Path("/var/lib")
    return Path.home() / ".local" / "state"


def outside_dir(project: Path) -> Path:
    """The data directory of ``project``, outside it: one per checkout."""
    digest = hashlib.sha256(str(project).encode("utf-8")).hexdigest()[:8]
    return state_home() / "task-executor" / f"{project.name}-{digest}"


def resolve_data_dir(configured: str) -> Path:
    """The data directory to use; creates the default link on first use (see module doc)."""
    path = Path(configured)
    if configured == DEFAULT_DATA_DIR and not path.exists() and not path.is_symlink():
        target = outside_dir(Path.cwd().resolve())
        target.mkdir(parents=True, exist_ok=True)
        try:
            path.symlink_to(target, target_is_directory=True)
            log.info("data directory %s links to %s", configured, target)
        except FileExistsError:
            pass  # another local process made it first
    resolved = path.resolve()
    resolved.mkdir(parents=True, exist_ok=True)
    return resolved


def _read_or_create(path: Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The key stored at ``path``, generated once (0600) if missing: (key, created).

    Written to a private temporary file, then hard-linked into place: the link fails if
    another process won the race, and nobody ever reads a half-written key.
    """
    if path.exists():
        return path.read_text(encoding="utf-8").strip(), False
    key = make()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    try:
        os.link(temporary, path)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip(), False
    finally:
        temporary.unlink()
    return key, True


def api_key(data_dir: Path) -> str:
    """The local bootstrap API key (``make run`` prints it; ``chalice local`` accepts it)."""
    key, _ = _read_or_create(
        data_dir / API_KEY_FILE, lambda: "te_local_" + secrets.token_urlsafe(24)
    )
    return key


def encryption_key(data_dir: Path) -> str:
    """The local secret encryption key (base64 of 32 random bytes)."""
    path = data_dir / ENCRYPTION_KEY_FILE
    key, created = _read_or_create(path, lambda: base64.b64encode(os.urandom(32)).decode("ascii"))
    if created:
        log.warning(
            "TE_SECRET_ENCRYPTION_KEY is unset: generated a local key (kept for later runs)",
            extra={"path": str(path)},
        )
    return key
