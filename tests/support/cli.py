"""``te`` (the CLI) run in-process through click's CliRunner against one running stack."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tests.support.environment import BOOTSTRAP_KEY


@dataclass
class Te:
    """``te`` against one running stack."""

    url: str
    tmp: Path
    key: str = BOOTSTRAP_KEY

    def __call__(self, *args: str, key: str | None = None, **env: str) -> Result:
        from te.cli import main

        environment = {"TE_URL": self.url, "TE_API_KEY": key or self.key, "TE_CONFIG": ""}
        environment.update(env)
        return CliRunner().invoke(main, list(args), env=environment, catch_exceptions=False)

    def ok(self, *args: str) -> Result:
        result = self(*args)
        assert result.exit_code == 0, (result.output, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").stdout)

    def file(self, name: str, content: Any) -> str:
        path = self.tmp / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)
