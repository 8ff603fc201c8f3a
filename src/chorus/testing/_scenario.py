"""Scenario data: what the fake model answers, turn by turn.

A scenario is plain data (frozen pydantic models, JSON round-trippable) so it
can be written inline in a test, stored in a file, or sent over the wire. One
:class:`Turn` is one model response to one main-agent request; the same turn is
rendered into the wire format of whichever API the CLI speaks (Anthropic
Messages, OpenAI Responses, Gemini).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Text(_Frozen):
    """Assistant text, streamed in ``chunks`` roughly equal pieces (at least 1)."""

    kind: Literal["text"] = "text"
    text: str
    chunks: int = Field(default=1, ge=1)


class Thinking(_Frozen):
    """Model reasoning: Claude ``thinking`` block, Codex reasoning summary, Gemini thought part."""

    kind: Literal["thinking"] = "thinking"
    text: str


class Shell(_Frozen):
    """A call to the CLI's own shell tool (Bash / exec_command / run_shell_command)."""

    kind: Literal["shell"] = "shell"
    command: str
    description: str = "Run a shell command"


class WriteFile(_Frozen):
    """A call to the CLI's file-write tool (Write / apply_patch Add File / write_file).

    A relative ``path`` is resolved against the working directory the CLI
    reports in its request (Claude and Gemini insist on absolute paths).
    """

    kind: Literal["write_file"] = "write_file"
    path: str
    content: str


class ToolCall(_Frozen):
    """A call to any tool by its API-level name with JSON arguments, rendered verbatim."""

    kind: Literal["tool_call"] = "tool_call"
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    #: OpenAI Responses only: the tool's namespace (Codex exposes deferred MCP tools
    #: as ``namespace="mcp__<server>"``, ``name="<tool>"``); ignored by other APIs.
    namespace: str | None = None


Block = Annotated[Text | Thinking | Shell | WriteFile | ToolCall, Field(discriminator="kind")]

ErrorKind = Literal[
    "rate_limit",  # retryable 429
    "quota",  # terminal 429: quota / billing exhausted
    "usage_limit",  # terminal 429: subscription usage limit (OpenAI ChatGPT plans)
    "overloaded",  # Anthropic 529, OpenAI/Gemini 503
    "server_error",  # 500
    "bad_request",  # 400
    "context_overflow",  # 400 with the API's context-window message
    "auth",  # invalid key (401; Gemini really answers 400 API_KEY_INVALID)
]


class Reply(_Frozen):
    """A successful streamed model response made of ordered blocks.

    ``delay`` seconds are slept before every streamed delta (and Gemini chunk), so
    ``Text(text, chunks=20)`` with ``delay=0.2`` streams for about 4 s: long
    enough to interrupt the CLI mid-stream.
    """

    kind: Literal["reply"] = "reply"
    blocks: tuple[Block, ...]
    delay: float = Field(default=0.0, ge=0.0)


class Failure(_Frozen):
    """An HTTP error response with the API's real error body and headers.

    ``times`` is how many consecutive main-agent requests get this error before
    the scenario moves on; ``None`` means every request from now on.
    """

    kind: Literal["failure"] = "failure"
    error: ErrorKind
    times: int | None = Field(default=1, ge=1)


Turn = Annotated[Reply | Failure, Field(discriminator="kind")]


def text(content: str, *, chunks: int = 1) -> Reply:
    """A turn answering with ``content`` only (``chunks`` streamed pieces)."""
    return Reply(blocks=(Text(text=content, chunks=chunks),))


def shell(command: str, *, say: str | None = None) -> Reply:
    """A turn calling the CLI's shell tool with ``command``, optionally after some text."""
    return _with_preamble(Shell(command=command), say)


def write_file(path: str, content: str, *, say: str | None = None) -> Reply:
    """A turn calling the CLI's file-write tool to create ``path`` with ``content``."""
    return _with_preamble(WriteFile(path=path, content=content), say)


def tool_call(
    name: str, arguments: dict[str, Any], *, say: str | None = None, namespace: str | None = None
) -> Reply:
    """A turn calling tool ``name`` with ``arguments`` exactly as given (API-level name)."""
    return _with_preamble(ToolCall(name=name, arguments=arguments, namespace=namespace), say)


def thinking(thought: str, answer: str) -> Reply:
    """A turn with a reasoning block followed by the text ``answer``."""
    return Reply(blocks=(Thinking(text=thought), Text(text=answer)))


def slow_text(content: str, *, chunks: int = 20, delay: float = 0.2) -> Reply:
    """A text turn streamed in ``chunks`` pieces with ``delay`` seconds before each."""
    return Reply(blocks=(Text(text=content, chunks=chunks),), delay=delay)


def error(kind: ErrorKind, *, times: int | None = 1) -> Failure:
    """An error turn; ``times=None`` fails every request from then on."""
    return Failure(error=kind, times=times)


def _with_preamble(block: Block, say: str | None) -> Reply:
    if say is None:
        return Reply(blocks=(block,))
    return Reply(blocks=(Text(text=say), block))


class Scenario(_Frozen):
    """An ordered list of turns, consumed one per main-agent request."""

    turns: tuple[Turn, ...] = ()

    @classmethod
    def of(cls, *turns: Turn) -> Scenario:
        """Build a scenario from turns given as arguments."""
        return cls(turns=tuple(turns))

    def to_json(self) -> str:
        """Serialize to JSON (inverse of :meth:`from_json`)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, data: str | bytes) -> Scenario:
        """Parse a scenario produced by :meth:`to_json`."""
        return cls.model_validate_json(data)


ScenarioLike = Scenario | Sequence[Reply | Failure] | Iterable[Reply | Failure]

_TURN_ADAPTER: TypeAdapter[Reply | Failure] = TypeAdapter(Turn)


def as_scenario(value: ScenarioLike) -> Scenario:
    """Accept a :class:`Scenario` or any iterable of turns."""
    if isinstance(value, Scenario):
        return value
    return Scenario(turns=tuple(_TURN_ADAPTER.validate_python(t) for t in value))


def split_chunks(content: str, chunks: int) -> list[str]:
    """Split ``content`` into at most ``chunks`` non-empty pieces that concatenate back.

    Empty text yields one empty piece so a text block is never without a delta.
    """
    if not content:
        return [""]
    n = max(1, min(chunks, len(content)))
    size, extra = divmod(len(content), n)
    pieces: list[str] = []
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        pieces.append(content[start:end])
        start = end
    return pieces
