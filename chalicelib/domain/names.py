"""Names of catalogue and register resources: what a client may call them.

Endpoint names follow the specification ("URL-safe: lowercase alphanumeric, hyphens"):
``^[a-z0-9]+(-[a-z0-9]+)*$``. Payload specs, configs and secrets additionally allow ``_``
because the specification's own examples name a secret ``email_api_key``; they must still
start with a letter or digit. Both are at most 100 characters and safe in a URL path.
Topics are named as endpoints are.
"""

from __future__ import annotations

import re

from chalicelib.errors import ValidationFailed

MAX_NAME_LENGTH = 100
ENDPOINT_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
CATALOGUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

ENDPOINT_NAME_RULE = "lowercase letters, digits and single hyphens between them"
CATALOGUE_NAME_RULE = "lowercase letters, digits, '-' and '_', starting with a letter or digit"


def _check(name: object, pattern: re.Pattern[str], rule: str, field: str = "name") -> str:
    if not isinstance(name, str):
        raise ValidationFailed(f"Field '{field}' must be a string.")
    if not name or len(name) > MAX_NAME_LENGTH or not pattern.fullmatch(name):
        raise ValidationFailed(
            f"Field '{field}' must be 1-{MAX_NAME_LENGTH} characters of {rule}; got {name!r}."
        )
    return name


def check_endpoint_name(name: object, field: str = "name") -> str:
    """``name`` if it is a valid endpoint (or topic) name, else 400 INVALID_REQUEST naming
    ``field``."""
    return _check(name, ENDPOINT_NAME, ENDPOINT_NAME_RULE, field)


def check_catalogue_name(name: object) -> str:
    """``name`` if it is a valid payload spec, config or secret name, else 400."""
    return _check(name, CATALOGUE_NAME, CATALOGUE_NAME_RULE)
