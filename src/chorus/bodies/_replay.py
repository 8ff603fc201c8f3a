"""Replay codecs for every body: a fresh codec fed a session's recorded lines.

``chorus replay`` (in the store) compares what these produce with the logged
events. Bodies do not import the store: whoever runs a replay registers
:func:`replay_codecs` into the store's registry (or passes one factory).

The one-shot and stream bodies need only stdout. The request/response bodies
(Codex app-server, every ACP agent) also read what Chorus wrote to stdin
(``sent``), to pair each answer with its request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from chorus.bodies.acp import AcpCodec, acp_agents
from chorus.bodies.claude import ClaudeCodec
from chorus.bodies.codex import AppServerCodec, ExecCodec
from chorus.bodies.gemini import GeminiStreamCodec
from chorus.config import ChorusConfig
from chorus.events import EVENT_TYPES, Event

#: Fed one stdout line, returns its events (the store's ``ReplayCodec``).
LineCodec = Callable[[str], Iterable[Event]]
ReplayFactory = Callable[[], LineCodec]


def _events(items: Iterable[Any]) -> list[Event]:
    """The canonical events among a codec's inbound items (requests, replies dropped)."""
    return [item for item in items if isinstance(item, EVENT_TYPES)]  # type: ignore[misc]


class AppServerReplay:
    """Codex app-server: stdout through the codec, stdin lines noted as requests.

    ``permission_mode`` is not compared: ``default`` and ``acceptEdits`` are the
    same on the wire (the body answers edit approvals itself in the latter).
    """

    not_compared: frozenset[str] = frozenset({"permission_mode"})

    def __init__(self) -> None:
        self.codec = AppServerCodec()

    def __call__(self, line: str) -> list[Event]:
        return _events(self.codec.receive_line(line))

    def sent(self, line: str) -> list[Event]:
        self.codec.note_sent(line)
        return []


class AcpReplay:
    """Any ACP agent: stdout through the codec, stdin lines noted as requests.

    Not compared: ``duration_ms`` (the body times a prompt itself), and the
    ``model`` / ``permission_mode`` Chorus asked for (not on the wire as such).
    """

    not_compared: frozenset[str] = frozenset({"duration_ms", "model", "permission_mode"})

    def __init__(self, codec: AcpCodec) -> None:
        self.codec = codec

    def __call__(self, line: str) -> list[Event]:
        return _events(self.codec.feed(line))

    def sent(self, line: str) -> list[Event]:
        self.codec.note_sent(line)
        return []


class ExecReplay:
    """``codex exec``: one process per turn, stdout only.

    ``model`` and ``permission_mode`` are what Chorus passed on the command
    line, not on the wire: not compared.
    """

    not_compared: frozenset[str] = frozenset({"model", "permission_mode"})

    def __init__(self) -> None:
        self.codec = ExecCodec()

    def __call__(self, line: str) -> list[Event]:
        if line.startswith('{"type":"thread.started"'):
            self.codec.begin_run(model=None, permission_mode=None)
        return self.codec.receive_line(line)

    def sent(self, line: str) -> list[Event]:
        return []


class GeminiStreamReplay:
    """``gemini -p --output-format stream-json``: one process per turn, each
    opening with an ``init`` line; the working directory is not on the wire."""

    not_compared: frozenset[str] = frozenset({"cwd"})

    def __init__(self) -> None:
        self.codec = GeminiStreamCodec(body="gemini")

    def __call__(self, line: str) -> list[Event]:
        if line.startswith('{"type":"init"'):
            self.codec.start_turn()
        return self.codec.feed(line)

    def sent(self, line: str) -> list[Event]:
        return []


def _acp_factory(name: str, config: ChorusConfig | None) -> ReplayFactory:
    agent = acp_agents(config)[name]
    return lambda: AcpReplay(AcpCodec(body=agent.name, quirks=agent.quirks))


def _stream_factories() -> dict[str, ReplayFactory]:
    return {
        "claude": lambda: ClaudeCodec().feed,
        "claude-print": lambda: ClaudeCodec().feed,
        "codex": AppServerReplay,
        "codex-exec": ExecReplay,
        "gemini-headless": GeminiStreamReplay,
    }


def replay_codecs(config: ChorusConfig | None = None) -> dict[str, ReplayFactory]:
    """A fresh-codec factory for every body name: the built-in bodies, the built-in
    ACP agents (``gemini`` included) and ``config``'s ACP agents."""
    factories = _stream_factories()
    for name in acp_agents(config):
        factories.setdefault(name, _acp_factory(name, config))
    return factories
