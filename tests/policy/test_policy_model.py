"""policy.toml: generated on first run, validated, errors name the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chorus._errors import ConfigError
from chorus.policy import DEFAULT_POLICY_TOML, Policy, load_policy, parse_policy, policy_path


def test_the_default_file_is_generated_on_first_run(chorus_home: Path) -> None:
    assert not policy_path().exists()
    policy = load_policy()
    assert policy == Policy()
    assert policy_path() == chorus_home / "policy.toml"
    assert policy_path().read_text() == DEFAULT_POLICY_TOML
    assert oct(os.stat(policy_path()).st_mode & 0o777) == "0o600"


def test_the_template_parses_to_exactly_the_defaults() -> None:
    assert parse_policy(DEFAULT_POLICY_TOML) == Policy()


def test_an_existing_file_is_kept(chorus_home: Path) -> None:
    chorus_home.mkdir()
    policy_path().write_text('mode = "plan"\n[shell]\nmode = "allowlist"\n')
    policy = load_policy()
    assert (policy.mode, policy.shell.mode) == ("plan", "allowlist")
    assert policy.filesystem.allowed_paths == ["{cwd}"]  # unspecified sections keep defaults


def test_missing_file_without_create_is_defaults_and_writes_nothing() -> None:
    assert load_policy(create=False) == Policy()
    assert not policy_path().exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('mode = "yolo"', "mode"),
        ('[shell]\nmode = "sometimes"', "shell.mode"),
        ("[shell]\ntimeout_s = -1", "shell.timeout_s"),
        ('[filesystem]\nallowed_paths = ["{project}/x"]', "unknown placeholder {project}"),
        ('[network]\nallowed_domains = ["https://example.com"]', "is not a domain"),
        ('[ask]\ndefault = "maybe"', "ask.default"),
        ('[shell]\ndenied_commands = ["\'unbalanced"]', "shell.denied_commands"),
        ("surprise = 1", "surprise"),
        ("mode = ", "not valid TOML"),
    ],
)
def test_invalid_policies_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=r"policy\.toml") as info:
        parse_policy(text)
    assert needle in str(info.value)


def test_secrets_policy_per_body() -> None:
    policy = Policy.model_validate(
        {"secrets": {"env_allowed": ["A_KEY"], "body_env": {"codex": ["B"]}}}
    )
    assert policy.secrets.allowed_for("codex") == ["A_KEY", "B"]
    assert policy.secrets.allowed_for("claude") == ["A_KEY"]
    assert policy.shell.timeout_for("pytest") == 600.0
