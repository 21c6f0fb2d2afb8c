"""Lambda entry points of the worker (being implemented)."""

from __future__ import annotations

from chalice import Blueprint

bp = Blueprint(__name__)
