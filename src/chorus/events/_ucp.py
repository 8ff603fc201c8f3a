"""UCP v1: the control envelope shared with Claude Code's stdio control protocol.

Frames a brain sends: ``control_request`` ``{request_id, request: {subtype, ...}}``,
``user`` messages, ``keep_alive``, and ``control_response`` (to answer a
permission ask). Frames Chorus sends: ``control_response``
``{response: {subtype: success|error, request_id, ...}}``, ``event`` frames
carrying a canonical event with its ``seq``, and ``keep_alive``.

Known request subtypes have typed models; the envelope itself accepts any
subtype string so that an unknown one can be answered with an ``error`` response
(code ``unsupported``) instead of a parse failure.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from chorus._limits import MAX_EVENT_BYTES
from chorus.events._json import validate_json
from chorus.events._model import Event, JsonDict

UCP_VERSION = 1


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)


#: A name, path or id that ends up on a command line or in a file name: no control
#: characters (a NUL cannot be passed to a process at all).
Word = Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]*$")]


class InitializeRequest(_Request):
    subtype: Literal["initialize"] = "initialize"
    body: Word | None = None
    model: Word | None = None
    cwd: Word | None = None
    permission_mode: Word | None = None
    resume: Word | None = None
    last_seq: int | None = None
    #: The brain answers ``can_use_tool`` requests (permission asks) on this link.
    can_use_tool: bool = False
    #: ... and reviews every call the policy allows (``can_use_tool`` requests with
    #: ``review``): a front whose client's own CLI asks about them; its deny denies.
    review_calls: bool = False
    #: For a body this initialize starts: a system prompt in place of the CLI's own
    #: (where the body can take one; elsewhere it is added, with a warning event) ...
    system_prompt: str | None = None
    #: ... text added to the body's system prompt (each body's own channel) ...
    append_system_prompt: str | None = None
    #: ... and MCP servers beside Chorus's: ``{name: {"command", "args", "env"}}``
    #: (stdio; another ``type`` is skipped with a warning event).
    mcp_servers: dict[str, JsonDict] | None = None


class SetModelRequest(_Request):
    subtype: Literal["set_model"] = "set_model"
    model: Word | None = None


class SetPermissionModeRequest(_Request):
    subtype: Literal["set_permission_mode"] = "set_permission_mode"
    mode: str


class SetMaxThinkingTokensRequest(_Request):
    subtype: Literal["set_max_thinking_tokens"] = "set_max_thinking_tokens"
    max_thinking_tokens: int | None = None


class InterruptRequest(_Request):
    subtype: Literal["interrupt"] = "interrupt"


class McpStatusRequest(_Request):
    subtype: Literal["mcp_status"] = "mcp_status"


class SteerRequest(_Request):
    subtype: Literal["steer"] = "steer"
    text: str


class StatusRequest(_Request):
    subtype: Literal["status"] = "status"


KnownRequest = Annotated[
    InitializeRequest
    | SetModelRequest
    | SetPermissionModeRequest
    | SetMaxThinkingTokensRequest
    | InterruptRequest
    | McpStatusRequest
    | SteerRequest
    | StatusRequest,
    Field(discriminator="subtype"),
]
KNOWN_REQUEST_ADAPTER: TypeAdapter[KnownRequest] = TypeAdapter(
    KnownRequest, config=ConfigDict(defer_build=True)
)
KNOWN_SUBTYPES = frozenset(
    {
        "initialize",
        "set_model",
        "set_permission_mode",
        "set_max_thinking_tokens",
        "interrupt",
        "mcp_status",
        "steer",
        "status",
    }
)


class CanUseToolRequest(_Request):
    """Chorus → brain: the policy asks about a tool call (answer with a success whose
    ``response`` is ``{"behavior": "allow" | "deny", "message": ...}``)."""

    subtype: Literal["can_use_tool"] = "can_use_tool"
    tool_name: str
    native_tool: str
    input: JsonDict
    flag_id: str
    reason: str
    default: Literal["allow", "deny"]
    expires: float
    #: The tool call's own id (as its ``tool_call`` event has it), when the body gave one.
    call_id: str | None = None
    #: A review of a call the policy allowed (no flag: ``flag_id`` is the review's id).
    review: bool = False


class RequestBody(_Request):
    """Any request body: a subtype plus free fields (validated per subtype later)."""

    subtype: str = Field(min_length=1, max_length=128)


class ControlRequest(_Frame):
    type: Literal["control_request"] = "control_request"
    request_id: str = Field(min_length=1, max_length=256)
    request: RequestBody


class SuccessBody(_Frame):
    subtype: Literal["success"] = "success"
    request_id: str
    response: JsonDict = Field(default_factory=dict)


class ErrorBody(_Frame):
    subtype: Literal["error"] = "error"
    request_id: str
    error: str
    error_code: str


class ControlResponse(_Frame):
    type: Literal["control_response"] = "control_response"
    response: Annotated[SuccessBody | ErrorBody, Field(discriminator="subtype")]


class UserContent(_Frame):
    role: Literal["user"] = "user"
    content: str | list[JsonDict]


class UserMessage(_Frame):
    type: Literal["user"] = "user"
    message: UserContent
    session_id: str = ""
    parent_tool_use_id: str | None = None


class KeepAlive(_Frame):
    type: Literal["keep_alive"] = "keep_alive"


class EventFrame(_Frame):
    type: Literal["event"] = "event"
    seq: int = Field(ge=0)
    event: Event


InboundFrame = Annotated[
    ControlRequest | ControlResponse | UserMessage | KeepAlive,
    Field(discriminator="type"),
]
OutboundFrame = Annotated[
    ControlResponse | ControlRequest | EventFrame | KeepAlive,
    Field(discriminator="type"),
]
INBOUND_ADAPTER: TypeAdapter[InboundFrame] = TypeAdapter(
    InboundFrame, config=ConfigDict(defer_build=True)
)
OUTBOUND_ADAPTER: TypeAdapter[OutboundFrame] = TypeAdapter(
    OutboundFrame, config=ConfigDict(defer_build=True)
)


def parse_inbound(data: str | bytes, *, max_bytes: int = MAX_EVENT_BYTES) -> InboundFrame:
    """Parse a frame from a brain. Raises :class:`chorus.EventError`."""
    return validate_json(INBOUND_ADAPTER, data, max_bytes=max_bytes)


def parse_outbound(data: str | bytes, *, max_bytes: int = MAX_EVENT_BYTES) -> OutboundFrame:
    """Parse a frame Chorus sent (used by clients and tests)."""
    return validate_json(OUTBOUND_ADAPTER, data, max_bytes=max_bytes)


def success(request_id: str, response: JsonDict | None = None) -> ControlResponse:
    return ControlResponse(response=SuccessBody(request_id=request_id, response=response or {}))


def error(request_id: str, message: str, code: str) -> ControlResponse:
    return ControlResponse(
        response=ErrorBody(request_id=request_id, error=message, error_code=code)
    )


def ucp_json_schema() -> dict[str, Any]:
    """JSON Schema of inbound and outbound UCP v1 frames and known requests."""
    return {
        "version": UCP_VERSION,
        "inbound": INBOUND_ADAPTER.json_schema(),
        "outbound": OUTBOUND_ADAPTER.json_schema(),
        "requests": KNOWN_REQUEST_ADAPTER.json_schema(),
        "outbound_requests": {"can_use_tool": CanUseToolRequest.model_json_schema()},
    }
