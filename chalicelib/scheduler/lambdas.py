"""Lambda entry points of the scheduler (being implemented)."""

from __future__ import annotations

from chalice import Blueprint

bp = Blueprint(__name__)
