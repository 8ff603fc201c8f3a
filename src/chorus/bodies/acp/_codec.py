"""Sans-I/O codec for the Agent Client Protocol (JSON-RPC 2.0, one object per line).

:meth:`AcpCodec.feed` takes one line the agent wrote and returns
:data:`Inbound` items: canonical events, :class:`RpcReply` for the answers to our
requests, typed requests the body must serve (:class:`PermissionRequested`,
:class:`FileReadRequested`, :class:`FileWriteRequested`) and :class:`Outgoing`
lines the codec answered by itself (e.g. ``method not found``). The command
methods (:meth:`~AcpCodec.initialize`, :meth:`~AcpCodec.prompt`, ...) return the
line to write. No asyncio, no processes; a line never raises.

Choices worth knowing:

- The reply to ``session/prompt`` is the turn's end: :class:`TurnCompleted`
  (``stopReason`` other than ``cancelled``, usage from ``usage`` or Gemini's
  ``_meta.quota``), :class:`TurnFailed` ``interrupted`` (``cancelled``), or
  :class:`TurnFailed` from the JSON-RPC error (Gemini: code 429 → quota).
- A permission request for a tool call not seen before first yields that
  :class:`ToolCall`; a denial yields the call's :class:`ToolResult`
  (``status="denied"``) since agents send no update for a rejected call.
- While ``session/load`` is pending, the replayed conversation becomes
  ``StatusChanged("history")`` so that it is never taken for new output.
- Params are built and parsed with the ``acp.schema`` models;
  ``session/set_model`` is not in that schema and is written raw.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from acp import schema
from acp.meta import PROTOCOL_VERSION
from pydantic import BaseModel, ValidationError

from chorus import __version__
from chorus.bodies._permissions import PermissionAnswer, PermissionAsk
from chorus.bodies.acp._errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    AcpStateError,
    rpc_error_info,
)
from chorus.bodies.acp._quirks import AcpQuirks
from chorus.bodies.acp._updates import ToolTracker, map_update, permission_ask
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    JsonDict,
    PermissionDecision,
    PermissionRequest,
    SessionStarted,
    StatusChanged,
    TextDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    Usage,
)

RpcId: TypeAlias = int | str

PROMPT = "session/prompt"
SET_MODEL = "session/set_model"
SET_CONFIG_OPTION = "session/set_config_option"


@dataclass(frozen=True, slots=True)
class RpcReply:
    """The agent's answer to one of our requests (``session/prompt`` excepted)."""

    request_id: int
    method: str
    result: Any = None
    error: JsonDict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    """``session/request_permission``: answer with :meth:`AcpCodec.answer_permission`."""

    request_id: RpcId
    ask: PermissionAsk


@dataclass(frozen=True, slots=True)
class FileReadRequested:
    """``fs/read_text_file``: answer with :meth:`AcpCodec.reply` or :meth:`AcpCodec.reply_error`."""

    request_id: RpcId
    path: str
    line: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class FileWriteRequested:
    """``fs/write_text_file``: answer with :meth:`AcpCodec.reply` (``None``) or an error."""

    request_id: RpcId
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A line the codec decided to send by itself; write it as is."""

    line: str


Inbound: TypeAlias = (
    "Event | RpcReply | PermissionRequested | FileReadRequested | FileWriteRequested | Outgoing"
)


@dataclass(slots=True)
class _Turn:
    request_id: int
    started: float
    texts: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _PendingPermission:
    call_id: str
    options: tuple[schema.PermissionOption, ...]


@dataclass(slots=True)
class SessionState:
    """What the agent told us about itself and the session (filled as replies arrive)."""

    agent: schema.InitializeResponse | None = None
    session_id: str | None = None
    cwd: str = ""
    modes: tuple[str, ...] = ()
    current_mode: str | None = None
    models: tuple[str, ...] = ()
    current_model: str | None = None
    config_options: dict[str, JsonDict] = field(default_factory=dict)

    def option_for(self, category: str) -> str | None:
        """The id of the session config option of ``category`` (e.g. ``model``), if any."""
        for option_id, option in self.config_options.items():
            if option.get("category") == category or option_id == category:
                return option_id
        return None

    def absorb_options(self, options: Any) -> None:
        """Take the agent's ``configOptions`` list (from a reply or an update)."""
        if not isinstance(options, list):
            return
        self.config_options = {
            str(o["id"]): o for o in options if isinstance(o, dict) and "id" in o
        }
        model = self.option_for("model")
        if model is not None and not self.models:
            self.current_model = _opt_str(self.config_options[model].get("currentValue"))


class AcpCodec:
    """One ACP connection with one session. ``body`` names the events' source."""

    def __init__(
        self,
        *,
        body: str = "acp",
        quirks: AcpQuirks | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.body = body
        self.quirks = quirks or AcpQuirks()
        self.state = SessionState()
        self._clock = clock
        self._next_id = 1
        self._pending: dict[int, tuple[str, JsonDict]] = {}
        self._expired: set[int] = set()
        self._turn: _Turn | None = None
        self._permissions: dict[RpcId, _PendingPermission] = {}
        self._tools = ToolTracker(self.quirks)
        #: What the body asked for (Chorus's names); :class:`SessionStarted` reports
        #: them once the session is open (the agent's own current model otherwise).
        self.requested_model: str | None = None
        self.requested_mode: str | None = None

    # -- state -----------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self.state.session_id

    @property
    def turn_request_id(self) -> int | None:
        """The id of the ``session/prompt`` still waiting for its reply, if any."""
        return self._turn.request_id if self._turn else None

    @property
    def can_load_session(self) -> bool:
        """True when ``session/load`` may be used: advertised, and not vetoed by a quirk."""
        caps = self.state.agent.agent_capabilities if self.state.agent else None
        return bool(self.quirks.load_session and caps is not None and caps.load_session)

    @property
    def pending_permissions(self) -> tuple[RpcId, ...]:
        return tuple(self._permissions)

    def _base(self) -> JsonDict:
        turn = f"prompt-{self._turn.request_id}" if self._turn else None
        return {"body": self.body, "native_session_id": self.state.session_id, "turn_id": turn}

    # -- commands --------------------------------------------------------------------

    def initialize(self, *, client_name: str = "chorus") -> tuple[int, str]:
        """``initialize``, advertising only what the body serves: the file system
        (read per quirk), no terminal."""
        caps = schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(
                read_text_file=self.quirks.read_text_file,
                write_text_file=self.quirks.write_text_file,
            ),
            terminal=False,
        )
        params = schema.InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=caps,
            client_info=schema.Implementation(name=client_name, version=__version__),
        )
        return self._request("initialize", _dump(params))

    def new_session(
        self,
        cwd: str,
        mcp_servers: Sequence[JsonDict] = (),
        additional_directories: Sequence[str] = (),
    ) -> tuple[int, str]:
        """``session/new`` in ``cwd`` with MCP servers in ACP form (validated here)."""
        self.state.cwd = cwd
        params: JsonDict = {"cwd": cwd, "mcpServers": list(mcp_servers)}
        if additional_directories:
            params["additionalDirectories"] = list(additional_directories)
        return self._request("session/new", _dump(schema.NewSessionRequest.model_validate(params)))

    def load_session(
        self, session_id: str, cwd: str, mcp_servers: Sequence[JsonDict] = ()
    ) -> tuple[int, str]:
        """``session/load``; the caller checks :attr:`can_load_session` first."""
        self.state.cwd = cwd
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
        return self._request(
            "session/load", _dump(schema.LoadSessionRequest.model_validate(params))
        )

    def prompt(self, text: str) -> tuple[int, str]:
        """``session/prompt`` with one text block; starts a turn. One turn at a time."""
        if self._turn is not None:
            raise AcpStateError(f"{self.body}: a turn is already running")
        params = schema.PromptRequest(
            session_id=self._require_session(),
            prompt=[schema.TextContentBlock(type="text", text=text)],
        )
        request_id, line = self._request(PROMPT, _dump(params))
        self._turn = _Turn(request_id, self._clock())
        return request_id, line

    def cancel(self) -> str:
        """The ``session/cancel`` notification (the prompt then ends ``cancelled``)."""
        params = schema.CancelNotification(session_id=self._require_session())
        return _line({"jsonrpc": "2.0", "method": "session/cancel", "params": _dump(params)})

    def set_mode(self, mode_id: str) -> tuple[int, str]:
        params = schema.SetSessionModeRequest(session_id=self._require_session(), mode_id=mode_id)
        return self._request("session/set_mode", _dump(params))

    def set_model(self, model_id: str) -> tuple[int, str]:
        """``session/set_model`` (unstable; missing from the SDK's schema, so raw)."""
        params = {"sessionId": self._require_session(), "modelId": model_id}
        return self._request(SET_MODEL, params)

    def set_config_option(self, config_id: str, value: str) -> tuple[int, str]:
        """``session/set_config_option`` for a select option (how codex-acp sets its model)."""
        params = schema.SetSessionConfigOptionSelectRequest(
            session_id=self._require_session(), config_id=config_id, value=value
        )
        return self._request(SET_CONFIG_OPTION, _dump(params))

    def method_of(self, request_id: int) -> str:
        """The method of our pending request ``request_id`` (for messages)."""
        pending = self._pending.get(request_id)
        return pending[0] if pending is not None else "request"

    def forget(self, request_id: int) -> None:
        """Stop waiting for ``request_id`` (timed out); a late reply becomes :class:`Unknown`."""
        if self._pending.pop(request_id, None) is not None:
            self._expired.add(request_id)

    def request(self, method: str, params: JsonDict) -> tuple[int, str]:
        """Any other request, raw (extension methods, ``session/list``, ...); the
        reply comes back as an :class:`RpcReply`."""
        return self._request(method, params)

    def _request(self, method: str, params: JsonDict) -> tuple[int, str]:
        request_id = self._next_id
        self._next_id += 1
        self._pending[request_id] = (method, params)
        msg = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return request_id, _line(msg)

    def note_sent(self, line: str) -> None:
        """Replay: take note of a line Chorus wrote, as if this codec had made it (a
        request to pair with its reply, a prompt that opens a turn, a permission
        answered)."""
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        request_id, method = msg.get("id"), msg.get("method")
        params = msg.get("params")
        params = params if isinstance(params, dict) else {}
        if isinstance(request_id, int) and isinstance(method, str):
            self._note_request(request_id, method, params)
        elif request_id is not None and method is None:
            self._permissions.pop(request_id, None)

    def _note_request(self, request_id: int, method: str, params: JsonDict) -> None:
        self._pending[request_id] = (method, params)
        self._next_id = max(self._next_id, request_id + 1)  # ours never reuse a replayed id
        if method in ("session/new", "session/load") and isinstance(params.get("cwd"), str):
            self.state.cwd = params["cwd"]
        if method == PROMPT:
            self._turn = _Turn(request_id, self._clock())

    def _require_session(self) -> str:
        if self.state.session_id is None:
            raise AcpStateError(f"{self.body}: no session yet (new_session first)")
        return self.state.session_id

    # -- answers to the agent's requests --------------------------------------------

    def reply(self, request_id: RpcId, result: Any) -> str:
        """A success reply to the agent's request ``request_id``."""
        return _line({"jsonrpc": "2.0", "id": request_id, "result": result})

    def reply_error(self, request_id: RpcId, code: int, message: str, data: Any = None) -> str:
        """An error reply to the agent's request ``request_id``."""
        error: JsonDict = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return _line({"jsonrpc": "2.0", "id": request_id, "error": error})

    def answer_permission(
        self, request_id: RpcId, answer: PermissionAnswer, *, source: str = "callback"
    ) -> tuple[str, list[Event]] | None:
        """The reply line and events for a decision; ``None`` if already answered.

        Allow picks ``allow_always`` for session scope else ``allow_once`` (each
        falling back to the other); deny picks ``reject_once`` (or
        ``reject_always``); with no fitting option the outcome is ``cancelled``.
        """
        pending = self._permissions.pop(request_id, None)
        if pending is None:
            return None
        option = choose_option(pending.options, answer)
        outcome: JsonDict = {"outcome": "cancelled"}
        if option is not None:
            outcome = {"outcome": "selected", "optionId": option}
        base = self._base()
        events: list[Event] = [
            PermissionDecision(
                request_id=str(request_id),
                decision=answer.decision,
                reason=answer.reason,
                source=source,
                **base,
            )
        ]
        if answer.decision == "deny" and self._tools.finish(pending.call_id):
            reason = answer.reason or "permission denied"
            events.append(
                ToolResult(
                    call_id=pending.call_id, output=reason, is_error=True, status="denied", **base
                )
            )
        return self.reply(request_id, {"outcome": outcome}), events

    def cancel_permissions(self, reason: str) -> list[tuple[str, list[Event]]]:
        """Answer every open permission request ``cancelled`` (ACP: required on cancel)."""
        answers: list[tuple[str, list[Event]]] = []
        for request_id in list(self._permissions):
            pending = self._permissions.pop(request_id)
            line = self.reply(request_id, {"outcome": {"outcome": "cancelled"}})
            decision = PermissionDecision(
                request_id=str(request_id),
                decision="deny",
                reason=reason,
                source="cancel",
                **self._base(),
            )
            self._tools.finish(pending.call_id)
            answers.append((line, [decision]))
        return answers

    # -- turn ends the codec cannot see on the wire ----------------------------------

    def expire_turn(self, error: ErrorInfo) -> TurnFailed | None:
        """End the current turn with ``error`` (deadline passed, cancel unanswered)."""
        if self._turn is None:
            return None
        base = self._base()
        self.forget(self._turn.request_id)
        self._turn = None
        return TurnFailed(error=error, terminal_reason=error.code.value, **base)

    # -- input -----------------------------------------------------------------------

    def feed(self, line: str) -> list[Inbound]:
        """Items for one line from the agent's stdout."""
        try:
            msg = json.loads(line)
        except ValueError:
            return [Unknown(raw=line, native_type="non_json", **self._base())]
        if not isinstance(msg, dict):
            return [Unknown(raw=line, native_type="non_object", **self._base())]
        method = msg.get("method")
        if isinstance(method, str) and "id" in msg:
            return self._agent_request(msg, method, line)
        if isinstance(method, str):
            return self._notification(msg, method, line)
        if "id" in msg and ("result" in msg or "error" in msg):
            return self._response(msg, line)
        return [Unknown(raw=line, native_type="invalid_jsonrpc", **self._base())]

    # -- notifications ---------------------------------------------------------------

    def _notification(self, msg: JsonDict, method: str, raw: str) -> list[Inbound]:
        if method != "session/update":
            return [Unknown(raw=raw, native_type=method, **self._base())]
        if self._loading():
            # session/load replays the stored conversation: history, not new output.
            update = (msg.get("params") or {}).get("update")
            return [StatusChanged(state="history", detail={"update": update}, **self._base())]
        try:
            note = schema.SessionNotification.model_validate(msg.get("params"))
        except ValidationError:
            return [Unknown(raw=raw, native_type=_update_kind(msg), **self._base())]
        events = map_update(note.update, self._tools, self.quirks, self._base(), raw)
        self._observe(events)
        return list(events)

    def _loading(self) -> bool:
        return any(method == "session/load" for method, _ in self._pending.values())

    def _observe(self, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, TextDelta) and self._turn is not None:
                self._turn.texts.append(event.text)
            elif isinstance(event, StatusChanged) and event.state == "mode" and event.detail:
                self.state.current_mode = str(event.detail.get("mode"))
            elif isinstance(event, StatusChanged) and event.state == "config_options":
                self.state.absorb_options((event.detail or {}).get("configOptions"))

    # -- the agent's requests ----------------------------------------------------------

    def _agent_request(self, msg: JsonDict, method: str, raw: str) -> list[Inbound]:
        request_id = msg["id"]
        params = msg.get("params")
        if method == "session/request_permission":
            return self._permission_request(request_id, params, raw)
        if method == "fs/read_text_file" and self.quirks.read_text_file:
            return self._parsed(request_id, params, schema.ReadTextFileRequest, self._read)
        if method == "fs/write_text_file" and self.quirks.write_text_file:
            return self._parsed(request_id, params, schema.WriteTextFileRequest, self._write)
        # Terminals, elicitation, ...: not advertised, so not served.
        not_found = self.reply_error(
            request_id, METHOD_NOT_FOUND, "Method not found", {"method": method}
        )
        return [Outgoing(not_found), Unknown(raw=raw, native_type=method, **self._base())]

    def _parsed(
        self,
        request_id: RpcId,
        params: Any,
        model: type[BaseModel],
        build: Callable[[RpcId, Any], Inbound],
    ) -> list[Inbound]:
        try:
            parsed = model.model_validate(params)
        except ValidationError as exc:
            detail = {"errors": exc.errors(include_url=False, include_context=False)}
            bad = self.reply_error(request_id, INVALID_PARAMS, "Invalid params", _jsonable(detail))
            return [Outgoing(bad)]
        return [build(request_id, parsed)]

    @staticmethod
    def _read(request_id: RpcId, req: Any) -> Inbound:
        return FileReadRequested(request_id, req.path, req.line, req.limit)

    @staticmethod
    def _write(request_id: RpcId, req: Any) -> Inbound:
        return FileWriteRequested(request_id, req.path, req.content)

    def _permission_request(self, request_id: RpcId, params: Any, raw: str) -> list[Inbound]:
        try:
            req = schema.RequestPermissionRequest.model_validate(params)
        except ValidationError:
            bad = self.reply_error(request_id, INVALID_PARAMS, "Invalid params")
            unknown = Unknown(raw=raw, native_type="request_permission", **self._base())
            return [Outgoing(bad), unknown]
        call = req.tool_call
        base = self._base()
        events: list[Inbound] = list(self._tools.started(call, base))
        ask = permission_ask(call, self._tools, self.body, self.state.cwd)
        self._permissions[request_id] = _PendingPermission(call.tool_call_id, tuple(req.options))
        events.append(
            PermissionRequest(
                request_id=str(request_id),
                tool=ask.tool,
                native_tool=ask.native_tool,
                input=ask.input,
                call_id=ask.call_id,
                description=ask.description,
                **base,
            )
        )
        events.append(PermissionRequested(request_id, ask))
        return events

    # -- replies to our requests -----------------------------------------------------

    def _response(self, msg: JsonDict, raw: str) -> list[Inbound]:
        request_id = msg.get("id")
        pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None or not isinstance(request_id, int):
            kind = "late_response" if request_id in self._expired else "orphan_response"
            return [Unknown(raw=raw, native_type=kind, **self._base())]
        method, params = pending
        error = msg.get("error")
        error = error if isinstance(error, dict) else None
        if method == PROMPT:
            return list(self._turn_end(request_id, msg.get("result"), error))
        reply = RpcReply(request_id, method, msg.get("result"), error)
        if not reply.ok:
            return [reply]
        self._absorb(method, params, reply.result)
        if method in ("session/new", "session/load"):
            return [self._session_started(), reply]
        return [reply]

    def _session_started(self) -> SessionStarted:
        """The session is open: decoded here, in line order, so replay reproduces it."""
        agent = self.state.agent.agent_info if self.state.agent else None
        return SessionStarted(
            model=self.requested_model or self.state.current_model,
            body_version=agent.version if agent else None,
            cwd=self.state.cwd,
            permission_mode=self.requested_mode,
            **self._base(),
        )

    def _absorb(self, method: str, params: JsonDict, result: Any) -> None:
        state = self.state
        if method == "initialize":
            state.agent = _validate(schema.InitializeResponse, result)
        elif method in ("session/new", "session/load"):
            state.session_id = _session_id(result) or params.get("sessionId")
            self._absorb_session(result)
        elif method == "session/set_mode":
            state.current_mode = params.get("modeId")
        elif method == SET_MODEL:
            state.current_model = params.get("modelId")
        elif method == SET_CONFIG_OPTION and isinstance(result, dict):
            state.absorb_options(result.get("configOptions"))

    def _absorb_session(self, result: Any) -> None:
        if not isinstance(result, dict):
            return
        modes = result.get("modes")
        if isinstance(modes, dict):
            self.state.modes = _ids(modes.get("availableModes"), "id")
            self.state.current_mode = _opt_str(modes.get("currentModeId"))
        models = result.get("models")  # unstable: not in the SDK schema yet
        if isinstance(models, dict):
            self.state.models = _ids(models.get("availableModels"), "modelId")
            self.state.current_model = _opt_str(models.get("currentModelId"))
        self.state.absorb_options(result.get("configOptions"))

    def _turn_end(self, request_id: int, result: Any, error: JsonDict | None) -> list[Event]:
        turn = self._turn
        base = self._base()
        self._turn = None
        duration = int((self._clock() - turn.started) * 1000) if turn else None
        if error is not None:
            info = rpc_error_info(
                _int(error.get("code")), str(error.get("message", "")), error.get("data")
            )
            return [TurnFailed(error=info, terminal_reason="rpc_error", **base)]
        parsed = _validate(schema.PromptResponse, result)
        if parsed is None:
            info = ErrorInfo(code=ErrorCode.BODY_PROTOCOL, message=f"bad prompt result: {result}")
            return [TurnFailed(error=info, **base)]
        usage = prompt_usage(result)
        if parsed.stop_reason == "cancelled":
            info = ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn cancelled")
            return [TurnFailed(error=info, usage=usage, terminal_reason="cancelled", **base)]
        return [
            TurnCompleted(
                result="".join(turn.texts) if turn else None,
                stop_reason=parsed.stop_reason,
                usage=usage,
                duration_ms=duration,
                **base,
            )
        ]


# -- helpers -------------------------------------------------------------------------


def choose_option(
    options: Sequence[schema.PermissionOption], answer: PermissionAnswer
) -> str | None:
    """The ``optionId`` that carries ``answer``, by option kind; ``None`` if none fits."""
    if answer.decision == "allow":
        order = ("allow_always", "allow_once")
        if answer.scope == "once":
            order = ("allow_once", "allow_always")
    else:
        order = ("reject_once", "reject_always")
    for kind in order:
        for option in options:
            if option.kind == kind:
                return str(option.option_id)
    return None


def prompt_usage(result: Any) -> Usage | None:
    """Token counts of one prompt: ACP ``usage`` (unstable) or Gemini ``_meta.quota``."""
    if not isinstance(result, dict):
        return None
    usage = result.get("usage")
    if isinstance(usage, dict):
        return Usage(
            input_tokens=_int(usage.get("inputTokens")),
            output_tokens=_int(usage.get("outputTokens")),
            cached_input_tokens=_int(usage.get("cachedReadTokens")),
            cache_write_input_tokens=_int(usage.get("cachedWriteTokens")),
            reasoning_tokens=_int(usage.get("thoughtTokens")),
        )
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, dict) else None
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if isinstance(counts, dict):
        return Usage(
            input_tokens=_int(counts.get("input_tokens")),
            output_tokens=_int(counts.get("output_tokens")),
        )
    return None


def _dump(model: BaseModel) -> JsonDict:
    dumped: JsonDict = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def _line(msg: JsonDict) -> str:
    # json.dumps escapes control characters, so the line never contains "\n".
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False)


def _validate(model: type[Any], value: Any) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _session_id(result: Any) -> str | None:
    return _opt_str(result.get("sessionId")) if isinstance(result, dict) else None


def _ids(items: Any, key: str) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(str(i[key]) for i in items if isinstance(i, dict) and key in i)


def _update_kind(msg: JsonDict) -> str:
    params = msg.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else "session/update"


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
