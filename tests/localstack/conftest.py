"""The LocalStack end-to-end tests' fixtures live in plugin.py (shared with tests/infra)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.import_plugin("tests.localstack.plugin")
