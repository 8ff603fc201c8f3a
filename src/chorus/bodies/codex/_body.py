"""The Codex bodies: ``codex app-server`` (long-lived) and ``codex exec`` (one-shot).

:class:`CodexBody` spawns ``codex app-server`` once, completes ``initialize``,
opens a thread (``thread/start``, or ``thread/resume`` for ``options.resume``;
an unknown thread starts a new one once, with a ``resume_fallback`` Notice)
and then runs one ``turn/start`` per :meth:`~CodexBody.turn`. Controls may be
called from another task while a turn streams: :meth:`~CodexBody.steer`
(``turn/steer``), :meth:`~CodexBody.interrupt` (``turn/interrupt``, waits for
the turn to end, escalates to signals), :meth:`~CodexBody.set_model` and
:meth:`~CodexBody.set_permission_mode` (both applied with the next
``turn/start``, which Codex keeps for later turns too).

Tasks: one runner task per process owns a TaskGroup with the approval
handlers; the runner feeds stdout to the codec, resolves request futures,
answers approvals through ``options.permission_callback`` and queues events.
When stdout ends it reports how (closed, crashed, killed) as events, never as
an exception.

:class:`CodexExecBody` runs ``codex exec --json`` per turn (``codex exec
resume <thread>`` after the first), stdin ``/dev/null`` (else exec waits for
EOF). It cannot ask for approval, steer, or stream text.

Offline traps handled for both: ``--disable plugins`` (else ``git ls-remote``
to github.com), ``--disable unbounded_connection_retries`` (else "server down"
retries forever); the config lives in ``CODEX_HOME`` from ``options.env``.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import ClassVar

from chorus._errors import BodyCrashedError, UserError
from chorus.agents import find_agent
from chorus.bodies._body import (
    Body,
    BodyOptions,
    interrupt_group,
    wait_task,
)
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._control import RequestRouter
from chorus.bodies._detached import (
    BodyHandle,
    Sent,
    replay_lines,
)
from chorus.bodies._inject import codex_args
from chorus.bodies._lifecycle import BodyState
from chorus.bodies._permissions import PermissionAnswer
from chorus.bodies._transport import AgentTransport, ProcessTransport, SpawnSpec
from chorus.bodies.codex._codec import (
    ApprovalRequest,
    AppServerCodec,
    AutoReply,
    Inbound,
    Request,
    RpcResponse,
)
from chorus.bodies.codex._errors import CodexRequestError
from chorus.bodies.codex._exec_codec import EXEC_BODY_NAME, ExecCodec
from chorus.bodies.codex._mcp_startup import McpStartup
from chorus.bodies.codex._policy import BODY_NAME, MODE_POLICIES, mode_policy
from chorus.bodies.codex._rollout import RolloutTail, codex_home
from chorus.events import (
    ErrorCode,
    Event,
    JsonDict,
    Notice,
    SessionEnded,
    SessionStarted,
    TurnCompleted,
    TurnFailed,
)

#: Flags that keep Codex offline-safe and bounded (AGENT_CLIS.md 2.2, 2.7).
OFFLINE_FLAGS: tuple[str, ...] = (
    "--disable",
    "plugins",
    "--disable",
    "unbounded_connection_retries",
)
APP_SERVER_ARGS: tuple[str, ...] = ("app-server", *OFFLINE_FLAGS)
EXEC_ARGS: tuple[str, ...] = ("--json", "--skip-git-repo-check", *OFFLINE_FLAGS)

_KILLED = "codex did not end the turn after turn/interrupt; process group killed"


def codex_executable(options: BodyOptions) -> Path:
    """``options.executable`` or the pinned install (config, project folder, PATH)."""
    return options.executable or find_agent("codex")


def _validate_mode(mode: str) -> str:
    if mode not in MODE_POLICIES:
        known = ", ".join(MODE_POLICIES)
        raise UserError(f"unknown permission mode {mode!r}; known: {known}")
    return mode


class CodexBody(Body):
    """Codex over ``codex app-server`` JSON-RPC on stdio.

    ``native_session_id`` is the thread id once Codex confirmed a thread
    (``options.resume`` is only a request until ``thread/resume`` succeeds).
    ``options.extra["fork"] = True`` with ``options.resume`` forks that thread
    (``thread/fork``) instead of continuing it.
    """

    name: ClassVar[str] = BODY_NAME
    detachable: ClassVar[bool] = True
    process_noun: ClassVar[str] = "app-server"
    capabilities: ClassVar[Capabilities] = Capabilities(
        interrupt=Support.NATIVE,
        set_model=Support.NATIVE,
        set_permission_mode=Support.NATIVE,
        max_thinking_tokens=Support.UNSUPPORTED,
        steer=Support.NATIVE,
        permission_callback=Support.NATIVE,
        resume=Support.NATIVE,
        fork=Support.NATIVE,
        usage=Support.NATIVE,
        cost=Support.UNSUPPORTED,
        rate_limit_signal=Support.NATIVE,
        mcp_status=Support.UNSUPPORTED,
    )

    def __init__(self, options: BodyOptions) -> None:
        super().__init__(options)
        _validate_mode(options.permission_mode)
        self.native_session_id = None
        self._codec = AppServerCodec()
        # The policy's roots besides cwd: also on argv, from the launcher.
        self._codec.writable_roots = tuple(options.extra.get("allowed_roots", ()))
        self._codec.contained = bool(options.extra.get("os_sandbox"))
        self._tg: asyncio.TaskGroup | None = None
        self._approvals: set[asyncio.Task[None]] = set()
        self._router = RequestRouter[RpcResponse](self.name)
        self._start_lock = asyncio.Lock()  # held while turn/start is in flight
        #: MCP servers still starting: a turn waits for them (their tools in it).
        self._mcp_startup = McpStartup()
        self._interrupt_lock = asyncio.Lock()
        self._next_model: str | None = None
        self._next_mode: str | None = None
        #: After :meth:`attach`: the previous owner's writes past the offset.
        self._sent_later: list[Sent] = []

    @property
    def turn_id(self) -> str | None:
        """Codex's id of the running turn, if any."""
        return self._codec.turn_id

    # -- lifecycle -------------------------------------------------------------------

    async def _handshake(self) -> None:
        """``initialize``, then open the thread; each step waits while app-server runs,
        up to ``options.start_timeout`` in all (:meth:`Body.start` says the rest)."""
        await self._start_request(self._codec.initialize())
        await self._write(self._codec.initialized())
        await self._open_thread()

    async def _start_request(self, request: Request) -> JsonDict:
        """A request of the start: it waits while app-server runs, up to the deadline."""
        return await self._request(request, timeout=self._start_limit(request.method))

    def _fresh_wire(self) -> None:
        old = self._codec
        self._codec = AppServerCodec()
        self._codec.writable_roots, self._codec.contained = old.writable_roots, old.contained
        self._router = RequestRouter[RpcResponse](self.name)

    async def _open_thread(self) -> None:
        """``thread/start``, or resume / fork ``options.resume``; a resume of a thread Codex
        does not know starts a new thread once, with a ``resume_fallback`` Notice."""
        cwd, mode, model = str(self.options.cwd), self.permission_mode, self.options.model
        resume = self.options.resume
        if resume is None:
            await self._start_request(self._codec.thread_start(cwd=cwd, mode=mode, model=model))
            await self._resumed(False, "no native session to resume")
            return
        fork = bool(self.options.extra.get("fork"))
        opener = self._codec.thread_fork if fork else self._codec.thread_resume
        try:
            await self._start_request(opener(resume, cwd=cwd, mode=mode, model=model))
        except CodexRequestError as exc:
            if exc.error_code != ErrorCode.SESSION_NOT_FOUND:
                raise
            message = f"Codex thread {resume} was not found; started a new thread"
            await self._emit(Notice(message=message, kind="resume_fallback"))
            await self._start_request(self._codec.thread_start(cwd=cwd, mode=mode, model=model))
            await self._resumed(False, f"Codex thread {resume} was not found")
            return
        await self._resumed(True)

    async def _spawn(self) -> None:
        exe = str(codex_executable(self.options))
        argv = [exe, *APP_SERVER_ARGS, *codex_args(self.options), *self.options.extra_args]
        spec = SpawnSpec(argv=argv, cwd=self.options.cwd, env=self.options.child_env())
        transport = await self._start_cli(spec)
        self._transport = transport
        await self._begin_reading(transport)

    def _attach_spec(self) -> SpawnSpec:
        options = self.options
        return SpawnSpec([str(codex_executable(options))], options.cwd, options.child_env())

    def _rebuild(self, handle: BodyHandle) -> None:
        """Replay what passed before the offset into the codec; the lines the previous
        owner wrote later are noted as the reader reaches their place in stdout (so
        the codec pairs their answers exactly as the previous owner's did)."""
        try:
            lines, self._sent_later = replay_lines(handle.run_dir, handle.offset)
        except OSError as exc:
            raise BodyCrashedError(
                f"body output file is gone: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        for stream, line in lines:
            if stream == "stdin":
                self._codec.note_sent(line)
                continue
            for item in self._codec.receive_line(line):
                if isinstance(item, SessionStarted | TurnCompleted | TurnFailed):
                    self._observe(item)
        # The thread's opening may be punched out of stdout by now (discard_before).
        self._codec.thread_id = self._codec.thread_id or self.options.resume
        self.native_session_id = self._codec.thread_id

    def _stop_handlers(self) -> None:
        for task in list(self._approvals):
            task.cancel()

    async def _emit(self, event: Event) -> None:
        if event.native_session_id is None and self.native_session_id is not None:
            event = event.model_copy(update={"native_session_id": self.native_session_id})
        await super()._emit(event)

    # -- the runner: stdout -> events --------------------------------------------------

    async def _read_stdout(self, transport: AgentTransport, skip: int) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            decode, before = self._codec.receive_line, self._note_sent_before
            async for item in self._marked(transport, decode, skip, before):
                await self._dispatch(item)
            await self._process_ended(transport)

    def _note_sent_before(self, offset: int) -> None:
        """Note the previous owner's writes made before stdout reached ``offset``."""
        while self._sent_later and self._sent_later[0][0] <= offset:
            self._codec.note_sent(self._sent_later.pop(0)[1])

    async def _dispatch(self, item: Inbound) -> None:
        if isinstance(item, RpcResponse):
            self._router.resolve(item.id, item)
        elif isinstance(item, ApprovalRequest):
            assert self._tg is not None
            task = self._tg.create_task(self._approve(item))
            self._approvals.add(task)
            task.add_done_callback(self._approvals.discard)
        elif isinstance(item, AutoReply):
            with contextlib.suppress(BodyCrashedError):
                await self._write(item.line)
        else:
            self._observe(item)
            await self._emit(item)

    def _observe(self, event: Event) -> None:
        self._mcp_startup.observe(event)
        if isinstance(event, SessionStarted):
            self.native_session_id = self._codec.thread_id
            self.model = self._codec.model
        if isinstance(event, TurnCompleted | TurnFailed):
            self._end_turn()

    async def _process_ended(self, transport: AgentTransport) -> None:
        """Stdout closed: fail waiters, stop approval handlers, report how it ended."""
        code = await transport.wait(5.0)
        tail = transport.stderr_tail
        crashed = BodyCrashedError("codex app-server ended", exit_code=code, stderr_tail=tail)
        self._router.fail_all(crashed)
        for task in list(self._approvals):
            task.cancel()
        for event in self._end_report(code, tail, _KILLED, self._codec.turn_id):
            await self._emit(event)
        self._life.exited()

    # -- approvals ------------------------------------------------------------------------

    async def _approve(self, approval: ApprovalRequest) -> None:
        """Answer one approval request; the decision event precedes the reply."""
        answer, source = await self._decide(approval)
        line, decision = self._codec.answer(approval, answer, source=source)
        await self._emit(decision)
        with contextlib.suppress(BodyCrashedError):
            await self._write(line)

    async def _decide(self, approval: ApprovalRequest) -> tuple[PermissionAnswer, str]:
        if approval.is_edit and mode_policy(self.permission_mode).auto_accept_edits:
            return PermissionAnswer.allow(), "mode"
        try:
            return await self.options.permission_callback(approval.ask), "callback"
        except Exception as exc:  # a policy bug must deny the tool, not kill the session
            return PermissionAnswer.deny(f"permission callback failed: {exc!r}"), "callback"

    # -- requests ------------------------------------------------------------------------

    async def _write(self, line: str) -> None:
        """The only path to app-server's stdin: codec-made lines only."""
        if self._transport is None:
            raise BodyCrashedError("Codex body not started", exit_code=None, stderr_tail="")
        await self._transport.write_line(line)

    async def _request(
        self,
        request: Request,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-request deadline
    ) -> JsonDict:
        """Send ``request`` and return its result; raises :class:`CodexRequestError` on a
        JSON-RPC error, :class:`BodyTimeoutError` past the deadline."""
        deadline = timeout if timeout is not None else self.options.control_timeout

        async def send() -> None:
            await self._write(request.line)

        response = await self._router.call(request.id, send, request.method, deadline)
        if not response.ok:
            raise CodexRequestError(request.method, response.error or {})
        return response.result or {}

    # -- turns and controls ------------------------------------------------------------------

    async def _send_prompt(self, prompt: str) -> None:
        self._begin_turn()
        await self._mcp_startup.settled(self.options.start_timeout)  # else: without them
        async with self._start_lock:
            request = self._codec.turn_start(prompt, model=self._next_model, mode=self._next_mode)
            self._next_model = self._next_mode = None
            try:
                await self._request(request)
            except BaseException:
                self._end_turn()
                raise

    def _already_running(self) -> Exception:
        return UserError("a Codex turn is already running; steer() or interrupt() it")

    async def steer(self, text: str) -> None:
        """Add ``text`` to the running turn (``turn/steer``); a :class:`Steer` event follows.

        Raises :class:`UserError` between turns and :class:`CodexRequestError` when
        Codex refuses (e.g. the turn ended meanwhile).
        """
        async with self._start_lock:
            pass  # a turn/start in flight must have its turn id first
        try:
            request = self._codec.turn_steer(text)
        except LookupError:
            raise UserError("no Codex turn is running to steer") from None
        await self._request(request)

    async def interrupt(self) -> None:
        """Stop the running turn; returns once it ended. Idempotent; a no-op between turns.

        Sends ``turn/interrupt`` and waits ``options.interrupt_timeout`` for
        ``turn/completed`` (status ``interrupted``); if it does not come, SIGTERMs
        (then SIGKILLs) the process group: ``TurnFailed(interrupted)`` plus
        ``SessionEnded("killed")``.
        """
        async with self._interrupt_lock:
            async with self._start_lock:
                pass
            await self._interrupt_turn(self._send_interrupt)

    async def _send_interrupt(self, limit: float) -> None:
        request = self._codec.turn_interrupt()
        if request is not None:
            await self._request(request, timeout=limit)

    async def set_model(self, model: str | None) -> None:
        """Use ``model`` from the next ``turn/start`` on (``None``: the thread's first model)."""
        chosen = model or self._codec.initial_model
        if chosen is not None:
            self._next_model = chosen
            self.model = chosen

    async def set_permission_mode(self, mode: str) -> None:
        """Switch approval policy and sandbox from the next ``turn/start`` on.

        Auto-accepting edits (``acceptEdits``) applies at once.
        """
        self._next_mode = _validate_mode(mode)
        self.permission_mode = mode


class CodexExecBody(Body):
    """Codex one-shot: a ``codex exec --json`` process per turn, resumed by thread id.

    The first turn starts a thread (or resumes ``options.resume``); later turns
    run ``codex exec resume <thread>``. ``set_model`` / ``set_permission_mode``
    take effect with the next process. ``interrupt`` signals the process group.
    """

    name: ClassVar[str] = EXEC_BODY_NAME
    long_lived: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities(
        interrupt=Support.EMULATED,
        set_model=Support.EMULATED,
        set_permission_mode=Support.EMULATED,
        max_thinking_tokens=Support.UNSUPPORTED,
        steer=Support.UNSUPPORTED,
        permission_callback=Support.UNSUPPORTED,
        resume=Support.NATIVE,
        fork=Support.UNSUPPORTED,
        usage=Support.NATIVE,
        cost=Support.UNSUPPORTED,
        rate_limit_signal=Support.EMULATED,
        mcp_status=Support.UNSUPPORTED,
        denial_reason=Support.UNSUPPORTED,  # (wording) exec's own refusals: the next prompt
    )

    def __init__(self, options: BodyOptions) -> None:
        super().__init__(options)
        _validate_mode(options.permission_mode)
        self._codec = ExecCodec(model=options.model, resumed=options.resume is not None)
        self._codec.thread_id = options.resume
        # The tool calls exec leaves out of its stdout are in Codex's rollout (wording).
        self._rollout = RolloutTail(codex_home(options.child_env()))
        self._executable: Path | None = None
        self._transport: ProcessTransport | None = None
        self._run_task: asyncio.Task[None] | None = None

    async def _spawn(self) -> None:
        """Find the executable (nothing runs until the first turn)."""
        self._executable = codex_executable(self.options)

    def argv(self) -> list[str]:
        """The command line of the next run (``exec`` or ``exec resume <thread>``)."""
        exe = str(self._executable or codex_executable(self.options))
        thread = self._codec.thread_id
        argv = [exe, "exec", *(["resume"] if thread else []), *EXEC_ARGS]
        if self.options.permission_args is not None:
            argv += self.options.permission_args
        elif self.permission_mode == "bypassPermissions":
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            # ``exec resume`` has no -s; the config key works for both.
            contained = bool(self.options.extra.get("os_sandbox"))
            sandbox = mode_policy(self.permission_mode, contained=contained).sandbox
            argv += ["-c", f'sandbox_mode="{sandbox}"']
        if self.model:
            argv += ["-m", self.model]
        argv += [*codex_args(self.options), *self.options.extra_args]
        # The prompt is read from stdin ("-"): argv is capped at 128 KiB per argument.
        return [*argv, "--", *([thread] if thread else []), "-"]

    async def _send_prompt(self, prompt: str) -> None:
        await self._finish_previous()
        self._begin_turn()
        try:
            transport = await self._spawn_turn(prompt)
        except BaseException:
            self._end_turn()
            raise
        self._run_task = asyncio.create_task(self._whole_turn(transport, prompt))

    async def _whole_turn(self, transport: ProcessTransport, prompt: str) -> None:
        try:
            await self._run(transport, prompt)
        finally:
            self._end_turn()

    async def _spawn_turn(self, prompt: str) -> ProcessTransport:
        self._codec.begin_run(model=self.model, permission_mode=self.permission_mode)
        self._rollout.mark(self._codec.thread_id)  # (wording)
        spec = SpawnSpec(argv=self.argv(), cwd=self.options.cwd, env=self.options.child_env())
        transport = ProcessTransport(spec, tap=self._rollout.wrap(self.options.raw_tap))
        await transport.start()
        self._transport = transport
        # codex exec waits for end-of-file on stdin: the prompt, then close.
        await transport.send_input(prompt)
        return transport

    async def _finish_previous(self) -> None:
        """Let the previous process exit after its terminal line (bounded)."""
        task = self._run_task
        if task is None or task.done():
            return
        if not self._codec.terminal_seen:
            raise UserError("a Codex exec turn is already running; interrupt() it first")
        if not await wait_task(task, 10.0) and self._transport is not None:
            await self._transport.close()
            await task

    async def _run(self, transport: ProcessTransport, prompt: str) -> None:
        async for line in transport.lines():
            for event in [*self._rollout.before(self._codec), *self._codec.receive_line(line)]:
                await self._emit(event)
        code = await transport.wait(10.0)
        if code is None:
            code = await transport.close()
        if self._thread_lost(code, transport.stderr_tail):
            await self._run(await self._fresh_spawn(prompt), prompt)
            return
        self.native_session_id = self._codec.thread_id
        drained = self._rollout.rest(self._codec)  # (wording) before finish: it reports the rest
        finish = self._codec.finish(code, transport.stderr_tail, interrupted=self._stopping)
        for event in [*drained, *finish]:
            await self._emit(event)

    def _thread_lost(self, code: int | None, stderr_tail: str) -> bool:
        """``exec resume`` of a thread Codex no longer has (rc 1, nothing on stdout)."""
        lost = code == 1 and "no rollout found for thread id" in stderr_tail
        return lost and self._codec.thread_id is not None and not self._stopping

    async def _fresh_spawn(self, prompt: str) -> ProcessTransport:
        """Heal a lost thread: a new one, with the session rebuilt from Chorus's log."""
        thread, self._codec.thread_id = self._codec.thread_id, None
        await self._resumed(False, f"Codex thread {thread} was not found")
        return await self._spawn_turn(self._with_history(prompt))

    async def _emit(self, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self.native_session_id = self._codec.thread_id
        await super()._emit(event)

    async def interrupt(self) -> None:
        """Stop the running ``codex exec`` (SIGINT, then escalation); a no-op between
        turns. Ends the turn with ``TurnFailed(interrupted)``."""
        task, transport = self._run_task, self._transport
        if task is None or task.done() or transport is None or self._codec.terminal_seen:
            return
        if self._life.state is BodyState.BUSY:
            self._life.to(BodyState.INTERRUPTING)
        await interrupt_group(task, transport, self.options.interrupt_timeout)

    async def set_model(self, model: str | None) -> None:
        """Run the next turn with ``-m model`` (``None``: the config's model)."""
        self.model = model

    async def set_permission_mode(self, mode: str) -> None:
        """Run the next turn with this mode's sandbox flags."""
        self.permission_mode = _validate_mode(mode)

    async def _shutdown(self) -> None:
        """Stop any running process; emits ``SessionEnded``."""
        await self.interrupt()
        if self._transport is not None:
            await self._transport.close()
        if self._run_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._run_task
        await self._emit(SessionEnded(reason="closed", exit_code=None))
