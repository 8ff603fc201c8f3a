"""What the fake model server saw: one :class:`RecordedRequest` per HTTP request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from chorus.testing import _anthropic, _gemini, _openai
from chorus.testing._wire import Api, ToolResult

RequestKind = Literal["turn", "side", "exhausted", "other"]
"""``turn`` consumed a scenario turn; ``side`` was a model check / router / title /
compaction call answered without one; ``exhausted`` was a main-agent call after the
scenario ran out (answered with a stock text); ``other`` is HEAD probes and unknown
paths."""


@dataclass(slots=True)
class RecordedRequest:
    """One request as received, plus how the server answered it.

    ``path`` includes the query string and has any ``/lanes/<name>`` prefix
    removed; ``headers`` keys are lower-case; ``body`` is the parsed JSON body or
    ``None``. ``status`` is the HTTP status the server chose. ``finished`` turns
    true once the response was written out or cut off; ``disconnected`` then says
    the client hung up mid-response (e.g. an interrupt) or the server stopped.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    timestamp: float
    lane: str
    api: Api | None
    kind: RequestKind
    turn_index: int | None = None
    status: int | None = None
    disconnected: bool = False
    finished: bool = False

    def last_user_text(self) -> str | None:
        """The last text the user typed, skipping injected context, per the request's API."""
        if self.api == "anthropic":
            return _anthropic.last_user_text(self.body)
        if self.api == "openai":
            return _openai.last_user_text(self.body)
        if self.api == "gemini":
            return _gemini.last_user_text(self.body)
        return None

    def tool_results(self) -> list[ToolResult]:
        """All tool results carried by the request, oldest first."""
        if self.api == "anthropic":
            return _anthropic.tool_results(self.body)
        if self.api == "openai":
            return _openai.tool_results(self.body)
        if self.api == "gemini":
            return _gemini.tool_results(self.body)
        return []

    @property
    def has_tool_result(self) -> bool:
        """True when the request carries at least one tool result."""
        return bool(self.tool_results())

    def last_tool_result(self) -> ToolResult | None:
        """The newest tool result in the request, if any."""
        results = self.tool_results()
        return results[-1] if results else None

    def working_dir(self) -> str | None:
        """The working directory the CLI announced in its context preamble."""
        if self.api == "anthropic":
            return _anthropic.working_dir(self.body)
        if self.api == "openai":
            return _openai.working_dir(self.body)
        if self.api == "gemini":
            return _gemini.working_dir(self.body)
        return None
