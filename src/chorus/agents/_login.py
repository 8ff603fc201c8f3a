"""Whether an agent CLI has a login it can run with, read the way the CLI itself
finds one: an API key in its environment (the person's, plus ``[agents.*.env]``),
or the CLI's own login files in the home it will run with. Never reads a secret's
value beyond "is it set"; never prints one.

Each CLI's places, as the pinned versions look for them:

- Claude Code: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``,
  ``CLAUDE_CODE_OAUTH_TOKEN``, Bedrock/Vertex switches; ``~/.claude/.credentials.json``
  (its subscription login).
- Codex: ``OPENAI_API_KEY``, ``CODEX_API_KEY``; ``$CODEX_HOME/auth.json`` (``codex
  login``); a ``model_provider`` in ``$CODEX_HOME/config.toml`` whose ``env_key`` is
  set, or that names no key at all (a local model server).
- Gemini CLI: ``GEMINI_API_KEY``, ``GOOGLE_API_KEY``, Vertex AI
  (``GOOGLE_GENAI_USE_VERTEXAI`` with a project); ``~/.gemini/oauth_creds.json``
  (its Google login).

An agent Chorus knows nothing about (any ACP agent) is taken as usable: only a
CLI whose every place is empty is said to need a login.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Per CLI family: the variables that carry an API key, in the CLI's own order.
_KEY_VARS: dict[str, tuple[str, ...]] = {
    "claude": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
#: Per CLI family: switches to a cloud provider's own credentials.
_CLOUD_VARS: dict[str, tuple[str, ...]] = {
    "claude": ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"),
    "codex": (),
    "gemini": ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"),
}
#: The login file under the home (Codex's is under CODEX_HOME), and what to do without one.
_LOGIN_FILE = {"claude": ".claude/.credentials.json", "gemini": ".gemini/oauth_creds.json"}
_HINT = {
    "claude": "set ANTHROPIC_API_KEY, or run `claude` once and log in",
    "codex": "set OPENAI_API_KEY, or run `codex login`",
    "gemini": "set GEMINI_API_KEY, or run `gemini` once and log in with Google",
}


@dataclass(frozen=True, slots=True)
class Login:
    """What an agent CLI would run with: ``kind`` is ``api key``, ``subscription``,
    ``cloud``, ``provider``, ``unknown`` (an agent Chorus cannot check) or ``none``."""

    cli: str
    kind: str
    #: Where it was found (a variable's name and where it is set, or a file): no value.
    source: str = ""
    #: What to do when there is none.
    hint: str = ""

    @property
    def usable(self) -> bool:
        return self.kind != "none"

    def describe(self) -> str:
        """One line for ``doctor`` and ``status``: never a secret."""
        if not self.usable:
            return f"needs login: {self.hint}"
        return f"{self.kind} ({self.source})" if self.source else self.kind

    def as_dict(self) -> dict[str, Any]:
        return {"cli": self.cli, "kind": self.kind, "source": self.source, "usable": self.usable}


def cli_family(name: str) -> str:
    """``claude-code-acp`` → ``claude``, ``codex-exec`` → ``codex``, ``mine`` → ``mine``."""
    return name.removesuffix("-acp").split("-")[0]


def find_login(name: str, given: Mapping[str, str], base: Mapping[str, str] | None = None) -> Login:
    """The login agent ``name`` would run with, given the variables Chorus gives it
    (``given``: ``[agents.*.env]``) on top of ``base`` (default: this process's)."""
    cli = cli_family(name)
    if cli not in _KEY_VARS:
        return Login(cli, "unknown", "not an agent Chorus can check")
    env = {**(os.environ if base is None else base), **given}
    return (
        _key(cli, env, given)
        or _cloud(cli, env)
        or _codex_provider(cli, env, given)
        or _file(cli, env)
        or Login(cli, "none", hint=_HINT[cli])
    )


def _where(var: str, given: Mapping[str, str]) -> str:
    return f"{var} in [agents.*.env]" if given.get(var) else f"{var} in the environment"


def _key(cli: str, env: Mapping[str, str], given: Mapping[str, str]) -> Login | None:
    found = next((v for v in _KEY_VARS[cli] if env.get(v)), None)
    return Login(cli, "api key", _where(found, given)) if found else None


def _cloud(cli: str, env: Mapping[str, str]) -> Login | None:
    found = next((v for v in _CLOUD_VARS[cli] if env.get(v) not in (None, "", "0", "false")), None)
    return Login(cli, "cloud", found) if found else None


def _file(cli: str, env: Mapping[str, str]) -> Login | None:
    path = _login_path(cli, env)
    return Login(cli, "subscription", str(path)) if path.is_file() else None


def _login_path(cli: str, env: Mapping[str, str]) -> Path:
    if cli == "codex":
        return _codex_home(env) / "auth.json"
    return Path(env.get("HOME") or Path.home()) / _LOGIN_FILE[cli]


def _codex_home(env: Mapping[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def _codex_provider(cli: str, env: Mapping[str, str], given: Mapping[str, str]) -> Login | None:
    """Codex's own ``model_provider``: usable when its ``env_key`` is set, or when it
    names no key (a local server)."""
    if cli != "codex":
        return None
    provider = _codex_provider_table(env)
    if provider is None:
        return None
    key = provider.get("env_key")
    if not key:
        return Login(cli, "provider", "a model_provider that needs no key")
    return Login(cli, "api key", _where(str(key), given)) if env.get(str(key)) else None


def _codex_provider_table(env: Mapping[str, str]) -> dict[str, Any] | None:
    home = _codex_home(env)
    try:
        config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = config.get("model_provider")
    table = (config.get("model_providers") or {}).get(name) if isinstance(name, str) else None
    return table if isinstance(table, dict) else None
