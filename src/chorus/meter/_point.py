"""Where a body's model API calls go: its session's meter URL on the channel listener.

``http://127.0.0.1:<port>/s/<session token>/meter/<api>/<ref>`` where ``ref`` is
``<upstream, base64url>.<MAC>``: the upstream (the base URL the body's own env or
config had, else its CLI's default) rides in the URL, signed with the channel key,
so the meter needs no state to forward a body's calls (a body left running across a
daemon restart still reaches its upstream) and no body can point it elsewhere.

- Claude Code: ``ANTHROPIC_BASE_URL`` (upstream: its value, else
  ``https://api.anthropic.com``).
- Codex: ``-c model_providers.<provider>.base_url=...`` (upstream: that custom
  provider's ``base_url`` in ``$CODEX_HOME/config.toml``).
- Gemini CLI: ``GOOGLE_GEMINI_BASE_URL`` (upstream: its value, else
  ``https://generativelanguage.googleapis.com``), only with an API key: a Google
  login goes to its own endpoint, and the variable alone would change the login.

Codex's built-in ``openai`` provider is left alone: it talks WebSocket first and its
ChatGPT login has its own endpoint (its usage then comes from the CLI's own report).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chorus.meter._usage import APIS, Api

if TYPE_CHECKING:
    from chorus.bodies import Channel

ROUTE = "meter"
DEFAULT_UPSTREAM: dict[Api, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}
_ENV_OF: dict[str, tuple[Api, str]] = {
    "claude": ("anthropic", "ANTHROPIC_BASE_URL"),
    "gemini": ("gemini", "GOOGLE_GEMINI_BASE_URL"),
}
#: The API each CLI's model calls speak (``status`` shows its quota beside the body).
API_OF_CLI: dict[str, Api] = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}
_BUILT_IN_PROVIDERS = frozenset({"openai", "oss", "ollama", "lmstudio"})
_MAC_CHARS = 24


def meter_url(channel: Channel, session_id: str | None, api: Api, upstream: str) -> str:
    """The base URL a body of ``session_id`` calls ``api`` at, forwarded to ``upstream``."""
    from chorus.bodies import NO_SESSION, session_token  # light callers need not load bodies

    channel_id = session_id or NO_SESSION
    token = session_token(channel.key, channel_id)
    ref = _ref(channel.key, channel_id, api, upstream)
    return f"http://{channel.host}:{channel.port}/s/{token}/{ROUTE}/{api}/{ref}"


def _ref(key: bytes, channel_id: str, api: str, upstream: str) -> str:
    coded = base64.urlsafe_b64encode(upstream.encode()).decode().rstrip("=")
    return f"{coded}.{_mac(key, channel_id, api, upstream)}"


def _mac(key: bytes, channel_id: str, api: str, upstream: str) -> str:
    text = "\0".join(("chorus-meter", channel_id, api, upstream)).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:_MAC_CHARS]


@dataclass(frozen=True, slots=True)
class Target:
    """A request's API, the upstream base URL, and the path below it."""

    api: Api
    upstream: str
    path: str


def resolve(key: bytes, channel_id: str, rest: str) -> Target | None:
    """``rest`` (``<api>/<ref>/<path>`` after ``/s/<token>/meter/``) when its ref
    was signed for ``channel_id``, else None."""
    api, _, tail = rest.lstrip("/").partition("/")
    ref, slash, path = tail.partition("/")
    if api not in APIS:
        return None
    upstream = _signed(key, channel_id, api, ref)
    return None if upstream is None else Target(api, upstream, slash + path)


@functools.lru_cache(maxsize=1024)  # a body sends the same ref with every request
def _signed(key: bytes, channel_id: str, api: Api, ref: str) -> str | None:
    """The upstream ``ref`` names when it was signed for ``channel_id`` and ``api``."""
    coded, dot, mac = ref.partition(".")
    if not dot:
        return None
    try:
        upstream = base64.urlsafe_b64decode(coded + "=" * (-len(coded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return upstream if hmac.compare_digest(_mac(key, channel_id, api, upstream), mac) else None


# -- pointing a body at it -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pointed:
    """What a body's start gets: env entries to set, arguments to add."""

    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()


_OPEN: list[Channel] = []


def open_meter(channel: Channel) -> None:
    """Say that this process meters bodies' model calls on ``channel`` (the daemon)."""
    _OPEN.append(channel)


def close_meter(channel: Channel) -> None:
    if channel in _OPEN:
        _OPEN.remove(channel)


def point_body(cli: str, env: Mapping[str, str], session_id: str | None) -> Pointed:
    """How to point ``cli`` (claude, codex, gemini) with ``env`` at its session's
    meter; nothing when no meter is open here or the CLI's upstream is not known."""
    if not _OPEN:
        return Pointed()
    channel = _OPEN[-1]
    if cli in _ENV_OF and (cli != "gemini" or _gemini_api_key(env)):
        api, var = _ENV_OF[cli]
        upstream = env.get(var) or DEFAULT_UPSTREAM[api]
        return Pointed(env={var: meter_url(channel, session_id, api, upstream.rstrip("/"))})
    if cli == "codex" and (found := codex_provider(env)) is not None:
        name, upstream = found
        url = meter_url(channel, session_id, "openai", upstream.rstrip("/"))
        return Pointed(args=("-c", f"model_providers.{_key(name)}.base_url={json.dumps(url)}"))
    return Pointed()


def _gemini_api_key(env: Mapping[str, str]) -> bool:
    """Gemini CLI takes its base URL only with an API key (a Google login goes to its
    own endpoint), and a base URL set without one would change how it logs in."""
    return any(env.get(v) for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"))


def codex_provider(env: Mapping[str, str]) -> tuple[str, str] | None:
    """Codex's configured custom provider and its ``base_url`` (``$CODEX_HOME``, else
    ``~/.codex``, ``config.toml``; a profile's ``model_provider`` counts)."""
    home = env.get("CODEX_HOME") or str(Path(env.get("HOME") or os.path.expanduser("~")) / ".codex")
    try:
        data = tomllib.loads((Path(home) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = _profile(data).get("model_provider") or data.get("model_provider")
    if not isinstance(name, str) or name in _BUILT_IN_PROVIDERS:
        return None
    provider = _table(_table(data.get("model_providers")).get(name))
    base = provider.get("base_url")
    return (name, base) if isinstance(base, str) and base.startswith("http") else None


def _profile(data: dict[str, Any]) -> dict[str, Any]:
    name = data.get("profile")
    return _table(_table(data.get("profiles")).get(name)) if isinstance(name, str) else {}


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _key(name: str) -> str:
    bare = name.replace("-", "").replace("_", "").isalnum() and name.isascii()
    return name if bare else json.dumps(name)
