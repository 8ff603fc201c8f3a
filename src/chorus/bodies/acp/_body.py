"""A body for any ACP agent: the codec over a :class:`ProcessTransport`.

Three layers, as in every body: the transport moves lines; the shared
:class:`RequestRouter` matches our requests to the agent's replies by id with a
bounded wait; the body
on top runs the handshake, turns and controls, and serves the agent's requests
(permission through ``options.permission_callback``, files inside the session's
roots).

Tasks: one supervisor task owns a TaskGroup holding the reader and every
handler it starts (permission, file system, turn deadline); :meth:`close`
cancels it, so nothing outlives the body.

``options.extra`` keys read here: ``mcp_servers`` (ACP-form MCP server objects
for ``session/new``) and ``allowed_roots`` (directories besides ``cwd`` the agent
may read and write through ``fs/*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, ClassVar, Self, cast

from chorus._errors import (
    BodyCrashedError,
    BodyProtocolError,
    BodyTimeoutError,
    UnsupportedControlError,
)
from chorus.bodies._body import (
    Body,
    BodyOptions,
    crash_error,
)
from chorus.bodies._capabilities import Capabilities
from chorus.bodies._control import RequestRouter
from chorus.bodies._detached import (
    BodyHandle,
    Sent,
    replay_lines,
)
from chorus.bodies._inject import acp_servers
from chorus.bodies._lifecycle import BodyState
from chorus.bodies._permissions import PermissionAnswer, PermissionAsk, denial_notice
from chorus.bodies._transport import AgentTransport, SpawnSpec
from chorus.bodies.acp._codec import (
    AcpCodec,
    FileReadRequested,
    FileWriteRequested,
    Inbound,
    Outgoing,
    PermissionRequested,
    RpcId,
    RpcReply,
)
from chorus.bodies.acp._errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    AcpRpcError,
    AcpStateError,
    FsAccessError,
)
from chorus.bodies.acp._fs import FileRoots
from chorus.bodies.acp._registry import ACP_CAPABILITIES, AcpAgent, acp_agent
from chorus.config import ChorusConfig
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Notice,
    SessionEnded,
    SessionStarted,
    TurnCompleted,
    TurnFailed,
)

_EXIT_WAIT = 5.0


class AcpBody(Body):
    """One ACP agent process with one session. Use ``async with`` or start/close.

    :meth:`turn` sends ``session/prompt``; every prompt has a deadline
    (``options.turn_timeout``): when it passes the body sends ``session/cancel``
    and, if the agent still does not answer within ``options.interrupt_timeout``,
    ends the turn itself with ``timeout``.
    """

    name: ClassVar[str] = "acp"
    capabilities: ClassVar[Capabilities] = ACP_CAPABILITIES
    context_in_first_prompt: ClassVar[bool] = True
    tells_denials: ClassVar[bool] = True

    def __init__(self, options: BodyOptions, agent: AcpAgent) -> None:
        super().__init__(options)
        self.agent = agent
        self.codec = AcpCodec(body=agent.name, quirks=agent.quirks)
        roots = options.extra.get("allowed_roots", ())
        self.roots = FileRoots.of(options.cwd, roots)
        self._router = RequestRouter[RpcReply](agent.name)
        self._handlers: dict[RpcId, asyncio.Task[None]] = {}
        self._tg: asyncio.TaskGroup | None = None
        self._ready = asyncio.Event()  # set once the reader's task group runs
        self._watchdog: asyncio.Task[None] | None = None
        self._denials: list[str] = []  # reasons the agent has not passed to the model
        self._followups = 0  # TurnCompleted events a denial follow-up continues
        self._approved: set[Path] = set()  # paths a write was allowed for, not yet written
        #: After :meth:`attach`: events of the first line already handed out, and the
        #: previous owner's writes past the offset (noted in stdout order).
        self._skip = 0
        self._sent_later: list[Sent] = []
        #: ``session/set_mode`` requests sent: each puts the agent in one of its own
        #: modes, out of the one its start arguments gave it (see ``_mode_by_args``).
        self._modes_set = 0

    # -- lifecycle -------------------------------------------------------------------

    def _start_failure(self, exc: BaseException) -> BaseException:
        """An ``AcpRpcError`` of a failed start, with what the agent said on stderr."""
        said = self._first_stderr_line() if isinstance(exc, AcpRpcError) else None
        if not isinstance(exc, AcpRpcError) or said is None:
            return exc
        message = f"{exc.rpc_message}; {self.agent.name} said on stderr: {said}"
        return AcpRpcError(exc.method, exc.code, message, exc.data)

    async def _spawn(self) -> None:
        """Start the agent's process (detached, outliving us, with ``options.run_dir``)."""
        transport = await self._start_cli(self._spawn_spec())
        self._transport = transport
        await self._begin_reading(transport)

    async def _begin_reading(self, transport: AgentTransport, skip: int = 0) -> None:
        self._skip = skip
        self._reader = asyncio.create_task(self._supervise(), name=f"acp:{self.agent.name}")
        await self._ready.wait()

    def _fresh_wire(self) -> None:
        self.codec = AcpCodec(body=self.agent.name, quirks=self.agent.quirks)
        self._router = RequestRouter[RpcReply](self.agent.name)
        self._ready = asyncio.Event()
        self._handlers.clear()

    def _first_stderr_line(self) -> str | None:
        """The first line the agent wrote on stderr: why a failed start failed
        (claude-code-acp: "--dangerously-skip-permissions cannot be used with root"),
        where the JSON-RPC error says only "Query closed before response received"."""
        tail = self._transport.stderr_tail if self._transport is not None else ""
        lines = [line.strip() for line in tail.splitlines()]
        said = [line for line in lines if line and not line.startswith("[")]  # log tags
        return said[0][:300] if said else None

    @classmethod
    def _for_attach(cls, options: BodyOptions) -> Self:
        raise UnsupportedControlError(cls.name, "attach", "only built-in ACP bodies re-attach")

    def _attach_spec(self) -> SpawnSpec:
        return self._spawn_spec()

    def _turn_running(self, turn_open: bool) -> bool:
        """Read from the rebuilt codec (a prompt without its reply), not trusted."""
        return self.codec.turn_request_id is not None

    def _rebuild(self, handle: BodyHandle) -> None:
        try:
            lines, self._sent_later = replay_lines(handle.run_dir, handle.offset)
        except OSError as exc:
            raise BodyCrashedError(
                f"body output file is gone: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        for stream, line in lines:
            if stream == "stdin":
                self.codec.note_sent(line)
                self._modes_set += '"session/set_mode"' in line
            else:
                self.codec.feed(line)
        # The session's opening may be punched out of stdout by now (discard_before).
        self.codec.state.session_id = self.codec.state.session_id or self.options.resume
        self.native_session_id = self.codec.state.session_id
        self.model = self.codec.state.current_model or self.options.model

    def _note_sent_before(self, offset: int) -> None:
        while self._sent_later and self._sent_later[0][0] <= offset:
            self.codec.note_sent(self._sent_later.pop(0)[1])

    def _spawn_spec(self) -> SpawnSpec:
        exe = self.options.executable or self.agent.executable()
        argv = [str(exe), *self.agent.args]
        flag = self.agent.quirks.model_flag
        if flag and self.options.model:
            argv += [flag, self.options.model]
        argv += self.agent.quirks.mode_args.get(self.options.permission_mode, ())
        argv += self.options.extra_args
        # The meter's base URL (chorus.meter) wins over the agent entry's own.
        env = {
            **self.options.child_env(),
            **self.agent.env,
            **self.options.extra.get("meter_env", {}),
        }
        return SpawnSpec(argv=argv, cwd=self.options.cwd, env=env)

    async def _emit(self, event: Event) -> None:
        # The class is shared by every ACP agent: events carry the agent's name.
        if isinstance(event, SessionStarted) and event.native_session_id:
            # Known before the session stores the event, so it stores the id with it
            # (a crash before the handshake's end still resumes this session).
            self.native_session_id = event.native_session_id
        await self._enqueue(event.model_copy(update={"body": self.agent.name}))

    # -- handshake ---------------------------------------------------------------------

    async def _handshake(self) -> None:
        """``initialize``, open the session (the codec decodes :class:`SessionStarted`
        from its reply), then apply model and permission mode."""
        self.codec.requested_model = self.options.model
        self.codec.requested_mode = self.options.permission_mode
        await self._call(self.codec.initialize())
        await self._open_session()
        model = self.options.model
        if model and not self.agent.quirks.model_flag and model != self.codec.state.current_model:
            await self.set_model(model)
        mode = self.options.permission_mode
        if mode != "default" and mode not in self.agent.quirks.mode_args:
            await self.set_permission_mode(mode)
        self.native_session_id = self.codec.state.session_id
        self.model = self.codec.state.current_model or self.options.model

    async def _open_session(self) -> None:
        """``session/load`` of ``options.resume`` where the agent can; otherwise, or
        when the load fails, a new session (rebuilt from ``options.history``)."""
        cwd = str(self.roots.roots[0])
        own = acp_servers(self.options, http=self._agent_takes_http())
        servers = [*own, *self.options.extra.get("mcp_servers", ())]
        resume = self.options.resume
        why = "no native session to resume"
        if resume and self.codec.can_load_session:
            try:
                self._before_load(resume)
                await self._call(self.codec.load_session(resume, cwd, servers))
            except AcpRpcError as exc:
                why = f"session/load of {resume} failed: {exc}"
            else:
                self._after_load(resume)
                await self._resumed(True)
                return
            await self._emit(Notice(kind="resume_fallback", message=f"{self.agent.name}: {why}"))
        elif resume:
            why = f"{self.agent.name} has no session/load"
            await self._emit(
                Notice(
                    kind="warning",
                    message=f"{self.agent.name} cannot resume session {resume} "
                    "(session/load not supported); started a new session",
                )
            )
        extra = [str(r) for r in self.roots.roots[1:]] if self._agent_takes_extra_roots() else []
        await self._call(self.codec.new_session(cwd, servers, extra))
        await self._resumed(False, why)

    def _before_load(self, session_id: str) -> None:
        """What an agent needs done before ``session/load`` of ``session_id`` (nothing
        by default)."""

    def _after_load(self, session_id: str) -> None:
        """What an agent needs done after a ``session/load`` of ``session_id`` that
        worked (nothing by default)."""

    def _agent_takes_http(self) -> bool:
        """Whether the agent's ``initialize`` said it reaches HTTP MCP servers (else
        Chorus's goes through the stdio relay)."""
        agent = self.codec.state.agent
        caps = agent.agent_capabilities if agent else None
        mcp = caps.mcp_capabilities if caps else None
        return bool(mcp is not None and mcp.http)

    def _agent_takes_extra_roots(self) -> bool:
        agent = self.codec.state.agent
        caps = agent.agent_capabilities if agent else None
        session = caps.session_capabilities if caps else None
        return bool(session is not None and getattr(session, "additional_directories", None))

    # -- the router: our requests, their replies ---------------------------------------

    async def _call(self, request: tuple[int, str], limit: float | None = None) -> RpcReply:
        """Write a request and wait (bounded) for its reply; raises :class:`AcpRpcError`
        on a JSON-RPC error, :class:`BodyTimeoutError`, :class:`BodyCrashedError`."""
        request_id, line = request
        limit = limit if limit is not None else self.options.control_timeout
        left = self._start_limit(self.codec.method_of(request_id))  # a handshake step
        limit = left if left is not None else limit

        async def send() -> None:
            await self._write(line)

        try:
            what = self.codec.method_of(request_id)
            reply = await self._router.call(request_id, send, what, limit)
        except BodyTimeoutError:
            self.codec.forget(request_id)
            raise
        if reply.error is not None:
            err = reply.error
            code = err.get("code")
            raise AcpRpcError(
                reply.method,
                code if isinstance(code, int) else 0,
                str(err.get("message", "")),
                err.get("data"),
            )
        return reply

    async def _write(self, line: str) -> None:
        if self._transport is None:
            raise AcpStateError(f"{self.agent.name}: body not started")
        await self._transport.write_line(line)

    # -- turns ---------------------------------------------------------------------------

    async def _send_prompt(self, prompt: str) -> None:
        if self._tg is None:  # the agent is gone (or never came): no turn begins
            raise self._not_running()
        self._begin_turn()
        try:
            request_id, line = self.codec.prompt(prompt)
        except BaseException:
            self._end_turn()
            raise
        self._watchdog = self._task(self._watch_turn(request_id))
        try:
            await self._write(line)
        except BodyCrashedError as exc:
            failed = self.codec.expire_turn(crash_error(exc.exit_code, exc.stderr_tail))
            if failed is not None:
                await self._finish_turn(failed)

    def _already_running(self) -> Exception:
        return AcpStateError(f"{self.agent.name}: a turn is already running")

    async def _watch_turn(self, request_id: int) -> None:
        """The prompt's deadline: cancel at ``turn_timeout``, give up after
        ``interrupt_timeout`` more."""
        await asyncio.sleep(self.options.turn_timeout)
        if self.codec.turn_request_id != request_id:
            return
        message = f"no answer to session/prompt within {self.options.turn_timeout}s"
        timeout = ErrorInfo(code=ErrorCode.TIMEOUT, message=message, retryable=True)
        await self._cancel_bounded("turn deadline passed", timeout)

    async def _cancel_bounded(self, reason: str, fallback: ErrorInfo) -> None:
        """``session/cancel``, then wait ``interrupt_timeout`` for the turn to end;
        past that, end it here with ``fallback`` (a late reply is then ignored)."""
        await self._cancel_turn(reason)
        try:
            await asyncio.wait_for(self._life.turn_over.wait(), self.options.interrupt_timeout)
        except TimeoutError:
            failed = self.codec.expire_turn(fallback)
            if failed is not None:
                await self._finish_turn(failed)

    async def _finish_turn(self, event: TurnCompleted | TurnFailed) -> None:
        event = self._ended_by_denial(event)
        self._approved.clear()  # an allowed write not made in its turn is asked again
        closing = self._life.state is BodyState.CLOSING
        follow_up = bool(self._denials) and isinstance(event, TurnCompleted) and not closing
        if follow_up:
            self._followups += 1
        self._end_turn()
        await self._emit(event)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog is not asyncio.current_task():
            watchdog.cancel()
        if follow_up:
            self._task(self._tell_denials())
        elif isinstance(event, TurnFailed):
            self._denials.clear()

    def _ended_by_denial(self, event: TurnCompleted | TurnFailed) -> TurnCompleted | TurnFailed:
        """A prompt the agent ended ``cancelled`` on its own right after a denial is the
        denial's doing, not an interrupt: codex-acp's only reject option is ``abort``
        ("No, provide feedback"), which stops the turn. It completes (``denied``) so
        the follow-up tells the model why and the Chorus turn goes on."""
        if not (
            isinstance(event, TurnFailed)
            and event.terminal_reason == "cancelled"
            and self._denials
            and self._life.state is BodyState.BUSY  # no cancel of ours, no close
        ):
            return event
        kept = event.model_dump(exclude={"type", "error", "terminal_reason"})
        return TurnCompleted(stop_reason="denied", terminal_reason="denied", **kept)

    async def _tell_denials(self) -> None:
        """ACP has no room for a denial's reason (claude-code-acp ends the turn with a
        fixed message, Gemini says "canceled by the user"): prompt the agent again,
        within the same Chorus turn, with the reasons."""
        reasons, self._denials = self._denials, []
        await self._send_prompt(denial_notice(reasons))

    def continues_after(self, event: Event) -> bool:
        return isinstance(event, TurnCompleted) and self._followups > 0

    def _ends_turn(self, event: Event) -> bool:
        if isinstance(event, TurnCompleted) and self._followups:
            self._followups -= 1
            return False
        return super()._ends_turn(event)

    # -- controls ------------------------------------------------------------------------

    async def interrupt(self) -> None:
        """``session/cancel`` the running turn (no-op when idle). Open permission
        requests are answered ``cancelled`` first, as ACP requires. Bounded: if the
        agent does not end the turn within ``options.interrupt_timeout`` the body
        ends it as ``interrupted``."""
        if self.codec.turn_request_id is None:
            return
        limit = self.options.interrupt_timeout
        message = f"agent did not end the turn within {limit}s of session/cancel"
        await self._cancel_bounded(
            "turn cancelled", ErrorInfo(code=ErrorCode.INTERRUPTED, message=message)
        )

    async def _cancel_turn(self, reason: str) -> None:
        if self._life.state is BodyState.BUSY:
            self._life.to(BodyState.INTERRUPTING)
        for line, events in self.codec.cancel_permissions(reason):
            for event in events:
                await self._emit(event)
            await self._write(line)
        for task in self._handlers.values():
            task.cancel()
        await self._write(self.codec.cancel())

    async def set_model(self, model: str | None) -> None:
        """The session's ``model`` config option when the agent offers one
        (``session/set_config_option``), else ``session/set_model``; an agent with
        neither raises :class:`UnsupportedControlError`."""
        if not model:
            raise self._unsupported("set_model", "ACP needs a model id")
        option = self.codec.state.option_for("model")
        request = (
            self.codec.set_config_option(option, model)
            if option is not None
            else self.codec.set_model(model)
        )
        try:
            await self._call(request)
        except AcpRpcError as exc:
            if exc.code == METHOD_NOT_FOUND:
                raise self._unsupported("set_model", str(exc)) from exc
            raise
        self.model = model

    async def set_permission_mode(self, mode: str) -> None:
        """``session/set_mode`` to the agent's mode for Chorus ``mode`` (an agent mode id
        is accepted as is); a mode the agent holds by its start arguments
        (``quirks.mode_args``) needs nothing sent, while the agent still holds one."""
        if mode in self.agent.quirks.mode_args:
            self._keep_args_mode(mode)
        else:
            await self._set_agent_mode(mode)
        self.permission_mode = mode
        self._approved.clear()  # what the old mode allowed is asked again in the new one
        note = self.agent.quirks.mode_notices.get(mode)
        if note is not None:
            await self._emit(Notice(kind="policy", message=f"{self.agent.name}: {note}"))

    def _keep_args_mode(self, mode: str) -> None:
        """Switch between modes the agent holds by its start arguments (the policy
        tells them apart); raises :class:`UnsupportedControlError` once the agent left
        them for a mode of its own, which it cannot be brought back from."""
        if not self._mode_by_args():
            raise self._unsupported(
                "set_permission_mode",
                f"{self.agent.name} cannot return to {mode!r} from {self.permission_mode!r}: "
                "none of its own modes asks before a command; start a new session",
            )

    async def _set_agent_mode(self, mode: str) -> None:
        native = self._agent_mode(mode)
        try:
            await self._call(self.codec.set_mode(native))
        except AcpRpcError as exc:
            if exc.code == METHOD_NOT_FOUND:
                raise self._unsupported("set_permission_mode", str(exc)) from exc
            raise
        self._modes_set += 1

    def _mode_by_args(self) -> bool:
        """Whether the agent holds the mode its start arguments gave it."""
        held = self.options.permission_mode in self.agent.quirks.mode_args
        return held and self._modes_set == 0

    def _agent_mode(self, mode: str) -> str:
        """The agent's mode for Chorus ``mode``: a quirk's alias first (the agent may
        have a mode of the same name that does not hold it), then the name itself."""
        modes = self.codec.state.modes
        alias = self.agent.quirks.mode_aliases.get(mode)
        if alias is not None and (alias in modes or not modes):
            return alias
        if mode in modes or not modes:
            return mode
        raise self._unsupported("set_permission_mode", f"{mode!r} is not one of {list(modes)}")

    # -- the reader and the agent's requests -----------------------------------------------

    def _task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        if self._tg is None:
            coro.close()
            raise self._not_running()
        return self._tg.create_task(coro)

    def _not_running(self) -> Exception:
        """Why no task can start: the agent's process ended (a crash, which a job
        survives by resuming), or the body never started."""
        if self._transport is None:
            return AcpStateError(f"{self.agent.name}: body not running")
        return BodyCrashedError(
            f"{self.agent.name}: agent process ended", exit_code=self.exit_code, stderr_tail=""
        )

    async def _supervise(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self._ready.set()
                await self._read()
        except Exception as exc:  # a bug in a handler must not leave turn() waiting forever
            await self._broken(exc)
        finally:
            self._tg = None

    async def _broken(self, exc: Exception) -> None:
        error = ErrorInfo(code=ErrorCode.BODY_PROTOCOL, message=f"ACP body failed: {exc!r}")
        if self._transport is not None:
            await self._transport.close()
        await self._end(BodyProtocolError(error.message), error, "error", self.exit_code)

    async def _read(self) -> None:
        assert self._transport is not None
        skip, self._skip = self._skip, 0
        marked = self._marked(self._transport, self.codec.feed, skip, self._note_sent_before)
        async for item in marked:
            await self._dispatch(item)
        await self._exited()

    async def _dispatch(self, item: Inbound) -> None:
        if isinstance(item, RpcReply):
            self._router.resolve(item.request_id, item)
        elif isinstance(item, PermissionRequested):
            self._handlers[item.request_id] = self._task(self._serve_permission(item))
        elif isinstance(item, FileReadRequested | FileWriteRequested):
            self._task(self._serve_fs(item))
        elif isinstance(item, Outgoing):
            self._task(self._send(item.line))
        elif isinstance(item, TurnCompleted | TurnFailed):
            await self._finish_turn(item)
        else:
            await self._emit(item)

    async def _send(self, line: str) -> None:
        # A reply the agent can no longer read is moot: its exit is reported by the reader.
        with contextlib.suppress(BodyCrashedError):
            await self._write(line)

    async def _serve_permission(self, item: PermissionRequested) -> None:
        try:
            answer = await self.options.permission_callback(item.ask)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a foreign callback: its failure is a denial, not a crash
            answer = PermissionAnswer.deny(f"permission callback failed: {exc!r}")
        finally:
            self._handlers.pop(item.request_id, None)
        answered = self.codec.answer_permission(item.request_id, answer)
        if answered is None:
            return
        if answer.decision == "deny":
            self._denials.append(answer.reason or "denied by the permission policy")
        elif item.ask.tool in _WRITES:
            self._approved.update(_resolved(item.ask))
        line, events = answered
        for event in events:
            await self._emit(event)
        await self._send(line)

    async def _serve_fs(self, item: FileReadRequested | FileWriteRequested) -> None:
        try:
            await self._fs_allowed(item)
            if isinstance(item, FileReadRequested):
                text = await asyncio.to_thread(
                    self.roots.read_text,
                    item.path,
                    line=item.line,
                    limit=item.limit,
                    missing_as_empty=self.agent.quirks.missing_file_as_empty,
                )
                line = self.codec.reply(item.request_id, {"content": text})
            else:
                await asyncio.to_thread(self.roots.write_text, item.path, item.content)
                line = self.codec.reply(item.request_id, None)
        except FsAccessError as exc:
            line = self.codec.reply_error(item.request_id, **exc.error_object())
            if exc.code != RESOURCE_NOT_FOUND:
                verb = "read" if isinstance(item, FileReadRequested) else "write"
                message = f"refused {verb} of {item.path}: {exc}"
                await self._emit(Notice(kind="warning", message=message))
        await self._send(line)

    async def _fs_allowed(self, item: FileReadRequested | FileWriteRequested) -> None:
        """Ask the policy about a ``fs/*`` request. Chorus serves it from outside the
        body's sandbox, so the policy must hold here what the sandbox holds for the
        agent's own reads and writes: denied paths (``.env``), plan mode's read-only
        roots. A write the policy has just allowed as a tool call is not asked twice.
        Raises :class:`FsAccessError` with the policy's reason (the model reads it)."""
        path = self.roots.check(item.path)
        write = isinstance(item, FileWriteRequested)
        if write and path in self._approved:
            self._approved.discard(path)
            return
        verb = "write" if write else "read"
        ask = PermissionAsk(
            body=self.agent.name,
            tool=verb,
            native_tool=f"fs/{verb}_text_file",
            input={"file_path": item.path},
            description=f"{verb} {item.path} (the agent's file system request)",
            cwd=str(self.roots.roots[0]),
            paths=(item.path,),
        )
        try:
            answer = await self.options.permission_callback(ask)
        except Exception as exc:  # a foreign callback: its failure is a denial
            answer = PermissionAnswer.deny(f"permission callback failed: {exc!r}")
        if answer.decision == "deny":
            reason = answer.reason or "denied by the permission policy"
            raise FsAccessError(INVALID_PARAMS, reason, path=item.path)

    async def _exited(self) -> None:
        """The agent closed stdout: fail what waits, end the turn and the session."""
        assert self._transport is not None
        code = await self._transport.wait(_EXIT_WAIT)
        tail = self._transport.stderr_tail
        crashed = BodyCrashedError(
            f"{self.agent.name} exited with code {code}", exit_code=code, stderr_tail=tail
        )
        if self._life.state is BodyState.CLOSING:
            await self._end(crashed, None, "closed", code)
        else:
            await self._end(crashed, crash_error(code, tail), "crashed", code)

    async def _end(
        self, exc: Exception, error: ErrorInfo | None, reason: str, code: int | None
    ) -> None:
        """Fail every waiter with ``exc``, end the turn, emit :class:`SessionEnded` once."""
        self._router.fail_all(exc)
        for task in self._handlers.values():
            task.cancel()
        turn_error = error or ErrorInfo(code=ErrorCode.INTERRUPTED, message="body closed")
        failed = self.codec.expire_turn(turn_error)
        if failed is not None:
            await self._finish_turn(failed)
        if self._life.state not in (BodyState.EXITED, BodyState.CLOSED):
            await self._emit(SessionEnded(reason=reason, exit_code=code, error=error))
            self._life.exited()

    @property
    def exit_code(self) -> int | None:
        """The agent's exit code once it has exited."""
        return self._transport.returncode if self._transport else None


_WRITES = frozenset({"write", "edit"})


def _resolved(ask: PermissionAsk) -> set[Path]:
    """The resolved paths a write tool call names (its locations and ``file_path``)."""
    named = [*ask.paths, ask.input.get("file_path")]
    return {Path(p).resolve() for p in named if isinstance(p, str) and p.startswith("/")}


@functools.cache
def _body_class(name: str, capabilities: Capabilities) -> type[AcpBody]:
    namespace = {"name": name, "capabilities": capabilities, "__module__": __name__}
    return cast("type[AcpBody]", type(f"AcpBody[{name}]", (AcpBody,), namespace))


def open_acp_body(
    name: str, options: BodyOptions, *, config: ChorusConfig | None = None
) -> AcpBody:
    """An (unstarted) body for ACP agent ``name``, built in or from ``config.toml``.

    Its class carries the agent's name and capabilities, so the gateway sees the
    agent's own declaration.
    """
    agent = acp_agent(name, config)
    return _body_class(agent.name, agent.capabilities)(options, agent)
