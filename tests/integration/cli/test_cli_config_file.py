"""The config file holds an API key: ``te`` warns on stderr when its group or others may
read it (as ssh does), and ``te configure`` writes it readable by its owner only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.support.cli import Te


def _config(tmp_path: Path, te: Te, mode: int) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f'url = "{te.url}"\napi_key = "{te.key}"\n')
    config.chmod(mode)
    return config


def test_a_world_readable_config_file_with_a_key_is_used_with_a_warning(
    te: Te, tmp_path: Path
) -> None:
    config = _config(tmp_path, te, 0o644)
    result = te("health", "--json", TE_URL="", TE_API_KEY="", TE_CONFIG=str(config))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    assert "warning" in result.stderr and str(config) in result.stderr
    assert "0644" in result.stderr and "chmod 600" in result.stderr
    assert te.key not in result.stderr


def test_a_group_readable_one_warns_too_and_a_private_one_does_not(te: Te, tmp_path: Path) -> None:
    config = _config(tmp_path, te, 0o640)
    warned = te("health", TE_URL="", TE_API_KEY="", TE_CONFIG=str(config))
    assert warned.exit_code == 0 and "warning" in warned.stderr
    config.chmod(0o600)
    quiet = te("health", TE_URL="", TE_API_KEY="", TE_CONFIG=str(config))
    assert quiet.exit_code == 0 and quiet.stderr == ""
    config.chmod(0o644)  # the key from the environment: the file's key is not used
    from_env = te("health", TE_API_KEY=te.key, TE_URL="", TE_CONFIG=str(config))
    assert from_env.exit_code == 0 and from_env.stderr == ""


def test_configure_writes_a_file_only_its_owner_reads(te: Te, tmp_path: Path) -> None:
    config = tmp_path / "new" / "config.toml"
    written = te(
        "configure", "--url", te.url, "--api-key", te.key, TE_CONFIG=str(config), TE_URL=""
    )
    assert written.exit_code == 0, written.output
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    used = te("health", "--json", TE_URL="", TE_API_KEY="", TE_CONFIG=str(config))
    assert used.exit_code == 0 and used.stderr == ""
    config.chmod(0o666)  # an existing file is made private when written again
    te("configure", "--url", te.url, "--api-key", te.key, TE_CONFIG=str(config))
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
