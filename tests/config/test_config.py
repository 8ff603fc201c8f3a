"""config.toml validation: clear errors naming the file and key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chorus import ConfigError
from chorus.config import chorus_home, load_config


def _write(text: str) -> Path:
    home = chorus_home()
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text)
    return path


def test_tests_run_with_a_temporary_home() -> None:
    assert "CHORUS_HOME" in os.environ
    assert chorus_home() != Path.home() / ".chorus"


def test_missing_file_gives_defaults() -> None:
    cfg = load_config()
    assert cfg.daemon.max_parallel_jobs == 3
    assert cfg.agents == {}


def test_valid_file_is_loaded() -> None:
    _write('[daemon]\nmax_parallel_jobs = 5\n[agents.myacp]\ncommand = "x"\nargs = ["--acp"]\n')
    cfg = load_config()
    assert cfg.daemon.max_parallel_jobs == 5
    assert cfg.agents["myacp"].args == ["--acp"]


def test_bad_toml_names_the_file() -> None:
    path = _write("[daemon\n")
    with pytest.raises(ConfigError, match=str(path)):
        load_config()


def test_unknown_key_and_bad_value_name_the_key() -> None:
    _write("[daemon]\nmax_parallel_jobs = 0\ncolour = 'red'\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert "daemon.max_parallel_jobs" in str(info.value)
    assert "daemon.colour" in str(info.value)


def test_gateway_and_brain_tables_are_validated_by_the_gateway() -> None:
    _write('[gateway]\nport = 0\n[brain]\nmax_attempts = 5\nurl_allowlist = ["^wss://"]\n')
    cfg = load_config()
    assert cfg.gateway == {"port": 0}
    assert cfg.brain["max_attempts"] == 5
    _write("[gateway]\nbogus = 1\n")
    with pytest.raises(ConfigError, match=r"gateway\.bogus"):
        load_config()
