"""Redaction of secret values from what a delivery brings back, in every encoding.

A target may echo what it received, and client libraries quote what they sent: a secret can
come back raw, JSON-escaped (``pw\\"with\\"quotes``, ``\\u00e4``), percent-encoded in
either case (``p%C3%A4ss``, ``p%c3%a4ss``, ``+`` for a space), base64-encoded (alone or
inside a larger base64 text such as a ``Basic`` credential) or hex-encoded in either case
(``70c3a4...``, ``70C3A4...``), HTML-escaped (``&amp;``, ``&quot;``, ``&#39;``, any
character reference), as Python prints a ``str`` or ``bytes`` (``'\\xe4'``,
``b'\\xc3\\xa4'``) or in base64 broken into lines (MIME's 76 columns). Parts count too:
every run of :data:`MIN_RUN` (6) characters of a secret is redacted, so a message quoting
part of one (a URL parser's error) shows none of it; a shorter secret is redacted whole
only. :class:`Redactor` replaces every such form with ``[REDACTED]``, and
:meth:`Redactor.cut` shortens text only after redacting, removing a form that the cut would
leave half-visible at the end.

:data:`LIVE_SECRETS` holds the values the process has decrypted, for what sees no
delivery's secrets: the log filter (:class:`chalicelib.logs.SecretFilter`, through a
:class:`Scrubber`) and the address policy (:meth:`LiveSecrets.in_host`).

How: raw, JSON-escaped and percent-encoded forms are matched by one regular expression per
secret in which every character may appear literally or in any of its escaped spellings
(mixtures included). The expression runs on RE2: spellings overlap (a backslash is one
backslash or two), and on a backtracking engine a secret of backslashes echoed back doubled
took exponential time; on RE2 matching is linear in the text. The encodings of the
secret's UTF-8 bytes are one list, :func:`byte_forms`: base64 matched by the encoded
characters that depend on the secret alone, for each of the three alignments the secret can
have inside a base64 text, in the standard and URL-safe alphabets; and hex in lower and
upper case (byte-aligned anywhere in a larger hex text, so one spelling each). A signing
key, which is bytes and not text, gets the same list
(:meth:`chalicelib.domain.signing.SigningKeys.redaction_forms`).
"""

from __future__ import annotations

import base64
import functools
import json
import re
import threading
from collections.abc import Iterable
from typing import Any

from chalicelib.domain.spellings import char_alternatives

REDACTED = "[REDACTED]"
#: Base64 cores shorter than this are not redacted (they would match ordinary text).
MIN_BASE64_CORE = 6
#: Secrets longer than this are matched by their canonical spellings only (a per-character
#: pattern for a 64 KiB value would take long to compile).
MAX_SPELLED = 1024
#: Runs of a secret this long or longer are redacted wherever they appear (a message that
#: quotes part of a secret); a shorter secret is redacted whole only (its parts are
#: ordinary text).
MIN_RUN = 6


class Redactor:
    """Finds and replaces the secrets of one delivery; build with :func:`redactor`."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._pattern: Any = _pattern(secrets)
        # The runs of a secret too long to spell are found by text search (as patterns,
        # 64 Ki runs would pass RE2's memory bound).
        self._long_runs = RunFinder(tuple(s for s in secrets if len(s) > MAX_SPELLED))
        self._plain_forms = sorted(
            {form for s in secrets for form in _plain_forms(s) if form}, key=len, reverse=True
        )

    def redact(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._long_runs(self._pattern.sub(REDACTED, text))

    def cut(self, text: str, limit: int) -> str:
        """``text`` redacted, then cut to ``limit`` characters with no half form at the end
        (a marker the cut would split is kept whole)."""
        text = self.redact(text)
        if len(text) <= limit:
            return text
        marker = text.find(REDACTED, max(0, limit - len(REDACTED) + 1), limit + len(REDACTED) - 1)
        if marker != -1:  # the cut falls inside a marker: keep the marker whole
            return text[: marker + len(REDACTED)]
        cut = text[:limit]
        for form in self._plain_forms:
            cut = _without_partial_tail(cut, form)
        return cut


def redactor(secrets: Iterable[str]) -> Redactor:
    """The (cached) redactor for a set of secret values."""
    return _cached(tuple(sorted({s for s in secrets if s})))


@functools.lru_cache(maxsize=256)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def _pattern(secrets: tuple[str, ...]) -> Any:
    """One alternation over every secret's spellings and base64 cores, longest first.

    Each secret is a fixed sequence of per-character alternatives without quantifiers.
    """
    parts: list[tuple[int, str]] = []
    for secret in secrets:
        if len(secret) <= MAX_SPELLED:
            chars = ["(?:" + "|".join(char_alternatives(c)) + ")" for c in secret]
            parts.append((len(secret), "".join(chars)))
            parts.extend((MIN_RUN, run) for run in _runs(chars))
        else:
            parts.extend((len(form), re.escape(form)) for form in _plain_forms(secret))
        raw = secret.encode()
        wrap = _wrapped if len(secret) <= MAX_SPELLED else re.escape  # RE2's memory bound
        parts.extend((len(form), wrap(form)) for form in _base64_cores(raw))
        parts.extend((len(form), re.escape(form)) for form in (raw.hex(), raw.hex().upper()))
    if not parts:
        return None
    parts.sort(key=lambda part: part[0], reverse=True)  # the whole secret before its runs
    import re2  # linear time whatever the secret and the text (see the module docstring)

    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # a 1,024-character secret's spellings need a few MiB
    return re2.compile("|".join(p for _, p in parts), options)


def _runs(chars: list[str]) -> set[str]:
    """Every :data:`MIN_RUN`-character run of a secret of more characters (each given as
    its pattern), once each."""
    if len(chars) <= MIN_RUN:
        return set()
    return {"".join(chars[i : i + MIN_RUN]) for i in range(len(chars) - MIN_RUN + 1)}


def _wrapped(core: str) -> str:
    """A base64 core, also when broken into lines (MIME writes 76 columns, ``\\r\\n``)."""
    return "(?:\\r?\\n)?".join(re.escape(c) for c in core)


def byte_forms(data: bytes) -> set[str]:
    """Every encoding of ``data`` a target or library could echo back as text: the base64
    cores at each alignment (both alphabets) and the hex in lower and upper case."""
    return _base64_cores(data) | {data.hex(), data.hex().upper()}


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters fixed by ``data`` alone, at each of 3 alignments."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data + b"\0\0").decode()
        first = -(-8 * offset // 6)  # first character whose 6 bits are all the secret's
        last = 8 * (offset + len(data)) // 6  # one past the last such character
        core = encoded[first:last]
        if len(core) >= MIN_BASE64_CORE:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def _plain_forms(secret: str) -> list[str]:
    """Canonical spellings, for spotting a form that a cut leaves half-visible."""
    from urllib.parse import quote, quote_plus

    forms = [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]
    for encoded in (quote(secret, safe=""), quote_plus(secret, safe="")):
        forms += [encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), encoded)]
    return forms + sorted(byte_forms(secret.encode()))


def _without_partial_tail(text: str, form: str, minimum: int = 3) -> str:
    """``text`` with a trailing prefix of ``form`` (``minimum`` chars or more) redacted."""
    if len(form) <= minimum:
        return text
    start = max(0, len(text) - len(form) + 1)
    position = text.find(form[:minimum], start)
    while position != -1:
        if form.startswith(text[position:]):
            return text[:position] + REDACTED
        position = text.find(form[:minimum], position + 1)
    return text


class LiveSecrets:
    """The secret values this process has decrypted, newest kept, for what sees no
    delivery's secrets: log lines of every logger (:class:`chalicelib.logs.SecretFilter`)
    and the address policy (:mod:`chalicelib.worker.ssrf`).

    Bounded (``max_values`` values, ``max_chars`` characters: the oldest go first); the
    values are never logged, nor shown by ``repr``. A value shorter than :data:`MIN_RUN`
    is not kept: looked for in every log line of the process, a letter or a short word
    would blank out ordinary text (a delivery's own outputs still redact it whole).
    """

    def __init__(self, max_values: int = 256, max_chars: int = 128 * 1024) -> None:
        self._max_values = max_values
        self._max_chars = max_chars
        self._values: dict[str, None] = {}  # insertion order: oldest first
        self._chars = 0
        self._lock = threading.Lock()
        self._scrubber: Scrubber | None = None

    def __repr__(self) -> str:
        return f"LiveSecrets({len(self._values)} values)"

    def add(self, value: str) -> None:
        """Remember ``value`` (again: it becomes the newest)."""
        if len(value) < MIN_RUN:
            return
        with self._lock:
            if value in self._values:
                del self._values[value]
                self._values[value] = None
                return
            self._values[value] = None
            self._chars += len(value)
            while len(self._values) > 1 and (
                len(self._values) > self._max_values or self._chars > self._max_chars
            ):
                oldest = next(iter(self._values))
                del self._values[oldest]
                self._chars -= len(oldest)
            self._scrubber = None

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._chars = 0
            self._scrubber = None

    def scrubber(self) -> Scrubber | None:
        """The scrubber of the current values, None while there are none."""
        with self._lock:
            if self._scrubber is None and self._values:
                self._scrubber = Scrubber(tuple(self._values))
            return self._scrubber

    def in_host(self, host: str) -> bool:
        """Whether ``host`` holds a secret's value: it contains a whole secret of
        :data:`MIN_RUN` characters or more, or a secret is a URL naming it (``://host``,
        ``@host``: a URL kept whole as a secret), in any case. Such a name must never go to
        a resolver. Parts of a secret are not looked for here: a host name sharing six
        characters with some secret is ordinary, and refusing it would fail unrelated
        deliveries."""
        if not host:
            return False
        with self._lock:
            values = tuple(self._values)
        host = host.lower()  # URL parsers lower-case host names; DNS ignores case
        named = (f"://{host}", f"@{host}")
        for value in map(str.lower, values):
            if len(value) >= MIN_RUN and value in host:
                return True
            if any(_names_host(value, form) for form in named):
                return True
        return False


def _names_host(value: str, form: str) -> bool:
    """Whether ``form`` (``://host`` or ``@host``) is in ``value`` as a whole authority."""
    start = value.find(form)
    while start != -1:
        end = start + len(form)
        if end == len(value) or value[end] in ":/?#":
            return True
        start = value.find(form, start + 1)
    return False


class RunFinder:
    """Redacts every run of :data:`MIN_RUN` characters of the given secrets (raw), merging
    overlapping runs into one marker: one set lookup per character of the text."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._runs = {
            s[i : i + MIN_RUN]
            for s in secrets
            if len(s) > MIN_RUN
            for i in range(len(s) - MIN_RUN + 1)
        }

    def __call__(self, text: str) -> str:
        if not self._runs or len(text) < MIN_RUN:
            return text
        covered = [False] * len(text)
        for i in range(len(text) - MIN_RUN + 1):
            if text[i : i + MIN_RUN] in self._runs:
                covered[i : i + MIN_RUN] = [True] * MIN_RUN
        if not any(covered):
            return text
        out, i = [], 0
        while i < len(text):
            if covered[i]:
                while i < len(text) and covered[i]:
                    i += 1
                out.append(REDACTED)
            else:
                out.append(text[i])
                i += 1
        return "".join(out)


class Scrubber:
    """Redacts the raw secrets, any run of :data:`MIN_RUN` of their characters, and their
    canonical encodings (JSON, percent, base64, hex) by plain text search: linear, and cheap
    enough for every log line of a process holding hundreds of secrets."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._forms = sorted(
            {form for s in secrets for form in [s, *_plain_forms(s)] if form}, key=len, reverse=True
        )
        self._runs = RunFinder(secrets)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return self._runs(text)


#: The process's decrypted secrets (filled by :meth:`chalicelib.crypto.SecretBox.decrypt`).
LIVE_SECRETS = LiveSecrets()


def remember_secret(value: str) -> None:
    """Add a decrypted value to :data:`LIVE_SECRETS` (logs and resolvers never see it)."""
    LIVE_SECRETS.add(value)
