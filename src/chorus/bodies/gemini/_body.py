"""Gemini CLI bodies: ACP (the primary channel) and one-shot ``stream-json`` runs.

:class:`GeminiAcpBody` is the generic ACP body bound to the built-in ``gemini``
entry (``gemini --acp``; its quirks: ``session/load`` resets a chat file of the
current minute, which the body renames first; missing files read as empty, mode
changes announced as text, tool names in call ids).

:class:`GeminiBody` is the fallback: one ``gemini --output-format stream-json``
process per turn (the prompt on its stdin), chained with ``--resume <session id>``. It has
no approval channel, so it runs ``--yolo`` (``--approval-mode plan`` /
``auto_edit`` for those permission modes); interrupting it signals the whole
process group (the launcher ignores a signal sent to it alone). The prompt goes on
stdin, not argv (the kernel caps one argument at 128 KiB); the stdout pipe is grown
so that the CLI's echo of a big prompt does not make Node drop the rest at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from chorus._errors import BodyCrashedError
from chorus.agents import find_agent
from chorus.bodies._body import PERMISSION_MODES, Body, BodyOptions
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._inject import gemini_env
from chorus.bodies._lifecycle import BodyState
from chorus.bodies._transport import ProcessTransport, SpawnSpec
from chorus.bodies.acp import GEMINI_ACP_CAPABILITIES, AcpAgent, AcpBody, acp_agent
from chorus.bodies.gemini._chats import (
    chat_files,
    drop_load_stubs,
    gemini_state,
    spare_this_minute,
)
from chorus.bodies.gemini._codec import GeminiStreamCodec
from chorus.bodies.gemini._errors import EXIT_BAD_INPUT, RunInProgressError
from chorus.bodies.gemini._settings import settings_problems
from chorus.events import ErrorCode, ErrorInfo, Event, Notice, SessionEnded, TurnCompleted

GEMINI_HEADLESS_CAPABILITIES = Capabilities(
    interrupt=Support.EMULATED,  # SIGTERM to the run's process group; the session survives
    set_model=Support.EMULATED,  # the next run's --model
    set_permission_mode=Support.EMULATED,  # the next run's --yolo / --approval-mode
    max_thinking_tokens=Support.UNSUPPORTED,
    steer=Support.UNSUPPORTED,
    permission_callback=Support.UNSUPPORTED,  # headless has no approval channel
    resume=Support.NATIVE,  # --resume <session id>
    fork=Support.UNSUPPORTED,
    usage=Support.NATIVE,  # result.stats
    cost=Support.UNSUPPORTED,
    rate_limit_signal=Support.NATIVE,  # exit 173 (= 429), result.status "error"
    # The policy file's refusals carry the reason; Gemini's own ones are told next prompt.
    denial_reason=Support.UNSUPPORTED,
)

#: Stdout pipe size asked for (capped by /proc/sys/fs/pipe-max-size, 1 MiB by default).
_STDOUT_PIPE_BYTES = 4 << 20

_APPROVAL_ARGS = {
    "plan": ("--approval-mode", "plan"),
    "acceptEdits": ("--approval-mode", "auto_edit"),
}
_EXIT_WAIT = 5.0


async def _settings_notices(body: Body, options: BodyOptions) -> None:
    for problem in settings_problems(options.child_env()):
        await body._emit(Notice(kind="warning", message=f"gemini settings: {problem}"))


class GeminiAcpBody(AcpBody):
    """``gemini --acp`` with Gemini's quirks; ``agent`` defaults to the registry entry
    (``config.toml`` ``[agents.gemini]`` may override its command, args, env)."""

    name: ClassVar[str] = "gemini"
    capabilities: ClassVar[Capabilities] = GEMINI_ACP_CAPABILITIES
    detachable: ClassVar[bool] = True

    def __init__(self, options: BodyOptions, agent: AcpAgent | None = None) -> None:
        super().__init__(options, agent or acp_agent("gemini"))
        self._chats_before: set[Path] = set()  # the session's chat files before a load

    @classmethod
    def _for_attach(cls, options: BodyOptions) -> Self:
        return cls(options)

    async def start(self) -> None:
        """Warn about settings that make Gemini slow to fail, then start as any ACP body."""
        await _settings_notices(self, self.options)
        await super().start()

    def _before_load(self, session_id: str) -> None:
        """Keep the session's chat file from being reset by the load (see
        :mod:`chorus.bodies.gemini._chats`)."""
        state = gemini_state(self._spawn_spec().env)
        if state is not None:
            spare_this_minute(state, session_id)
            self._chats_before = chat_files(state, session_id)

    def _after_load(self, session_id: str) -> None:
        """Delete the empty file the load left, which would get the session deleted."""
        state = gemini_state(self._spawn_spec().env)
        if state is not None:
            drop_load_stubs(state, session_id, self._chats_before)


@dataclass(slots=True)
class _Run:
    """One ``gemini -p`` process and the task pumping its output."""

    transport: ProcessTransport
    prompt: str = ""
    task: asyncio.Task[None] | None = None
    stopped: ErrorInfo | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class GeminiBody(Body):
    """Gemini CLI one-shot body: a process per turn, the session kept by ``--resume``.

    Call :meth:`start` first (no process yet: it finds the CLI and checks
    settings). One turn at a time; the next :meth:`turn` waits for the previous
    process to be reaped.
    """

    name: ClassVar[str] = "gemini"
    long_lived: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = GEMINI_HEADLESS_CAPABILITIES
    context_in_first_prompt: ClassVar[bool] = True

    def __init__(self, options: BodyOptions) -> None:
        super().__init__(options)
        self.codec = GeminiStreamCodec(body=self.name, cwd=str(options.cwd))
        self._executable: Path | None = None
        self._run: _Run | None = None
        # Only a session with a completed turn is stored by Gemini; resuming any
        # other fails with exit 42 ("No previous sessions found").
        self._resumable: str | None = options.resume

    # -- lifecycle -------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running turn's process id (its process group id), if a turn runs."""
        run = self._run
        return run.transport.pid if run is not None and not run.done.is_set() else None

    async def _spawn(self) -> None:
        """Find the CLI and warn about settings; no process is started until a turn."""
        self._executable = self.options.executable or find_agent("gemini")
        await _settings_notices(self, self.options)

    async def _shutdown(self) -> None:
        """Stop a running turn (process group signalled), then emit :class:`SessionEnded`."""
        await self._stop(ErrorInfo(code=ErrorCode.INTERRUPTED, message="body closed"))
        await self._emit(SessionEnded(reason="closed", native_session_id=self.native_session_id))

    # -- turns -----------------------------------------------------------------------

    async def _send_prompt(self, prompt: str) -> None:
        if self._executable is None or self._life.finished:
            raise RunInProgressError("gemini: body not started (or closed)")
        previous = self._run
        if previous is not None and not self.codec.turn_done:
            raise RunInProgressError("gemini: a turn is already running")
        if previous is not None:
            await self._reap(previous)
        self._begin_turn()
        await self._spawn_run(prompt)

    async def _spawn_run(self, prompt: str) -> None:
        self.codec.start_turn()
        spec = SpawnSpec(
            argv=self._argv(),
            cwd=self.options.cwd,
            env={**self.options.child_env(), **gemini_env(self.options)},
            stdout_pipe_bytes=_STDOUT_PIPE_BYTES,
        )
        run = _Run(ProcessTransport(spec, self.options.raw_tap), prompt)
        self._run = run
        try:
            await run.transport.start()
            # Without --prompt, gemini reads the prompt from stdin to end-of-file.
            await run.transport.send_input(prompt)
        except BodyCrashedError as exc:
            self._run_over(run)
            await self._emit_all(self.codec.finish(None, str(exc)))
            return
        run.task = asyncio.create_task(self._pump(run), name="gemini-run")

    def _argv(self) -> list[str]:
        # No --prompt: the prompt goes on stdin (no argv size limit, never read as a flag).
        argv = [str(self._executable), "--output-format", "stream-json"]
        if self.options.permission_args is not None:
            argv += self.options.permission_args
        else:
            argv += _APPROVAL_ARGS.get(self.permission_mode, ("--yolo",))
        if self.model:
            argv += ["--model", self.model]
        if self._resumable:
            argv += ["--resume", self._resumable]
        return argv + list(self.options.extra_args)

    async def _pump(self, run: _Run) -> None:
        """Feed the run's stdout to the codec until it ends, then end the turn."""
        transport = run.transport
        try:
            try:
                async with asyncio.timeout(self.options.turn_timeout):
                    async for line in transport.lines():
                        await self._emit_all(self._note(self.codec.feed(line)))
            except TimeoutError:
                run.stopped = ErrorInfo(
                    code=ErrorCode.TIMEOUT,
                    message=f"gemini run exceeded {self.options.turn_timeout}s",
                    retryable=True,
                )
            code = await transport.wait(_EXIT_WAIT) if run.stopped is None else None
            # Reaps the group too: a shell the agent started must not outlive the turn.
            closed = await transport.close(grace=0.5, term_wait=2.0)
            code = code if code is not None else closed
            stderr = transport.stderr_tail
            if self._session_lost(code, stderr, run):
                await self._heal(run)
            else:
                await self._emit_all(self.codec.finish(code, stderr, stopped=run.stopped))
        finally:
            self._run_over(run)

    def _run_over(self, run: _Run) -> None:
        """``run``'s process is gone; the turn ends with it (not with a run it healed)."""
        run.done.set()
        if self._run is run:
            self._end_turn()

    def _session_lost(self, code: int | None, stderr: str, run: _Run) -> bool:
        """``--resume`` of a session Gemini no longer has (exit 42, before any output)."""
        lost = code == EXIT_BAD_INPUT and "Error resuming session" in stderr
        return lost and self._resumable is not None and run.stopped is None

    async def _heal(self, run: _Run) -> None:
        """Run the turn again in a new session, rebuilt from Chorus's log."""
        session, self._resumable = self._resumable, None
        await self._resumed(False, f"Gemini session {session} was not found")
        await self._spawn_run(self._with_history(run.prompt))

    def _note(self, events: list[Event]) -> list[Event]:
        self.native_session_id = self.codec.session_id
        if any(isinstance(e, TurnCompleted) for e in events):
            self._resumable = self.codec.session_id
        return events

    async def _emit_all(self, events: list[Event]) -> None:
        for event in events:
            await self._emit(event)

    async def _reap(self, run: _Run) -> None:
        if run.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await run.task

    # -- controls --------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Stop the running turn (SIGTERM to its process group, SIGKILL after
        ``options.interrupt_timeout``); it ends ``interrupted``. No-op when idle."""
        await self._stop(ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted"))

    async def _stop(self, reason: ErrorInfo) -> None:
        run = self._run
        if run is None or run.done.is_set():
            return
        if self._life.state is BodyState.BUSY:
            self._life.to(BodyState.INTERRUPTING)
        if not self.codec.turn_done:
            run.stopped = run.stopped or reason
        run.transport.signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(run.done.wait(), self.options.interrupt_timeout)
        except TimeoutError:
            run.transport.signal_group(signal.SIGKILL)
        await self._reap(run)

    async def set_model(self, model: str | None) -> None:
        """Use ``model`` from the next turn on (``None``: the CLI's default, ``auto``)."""
        self.model = model

    async def set_permission_mode(self, mode: str) -> None:
        """Use ``mode`` from the next turn on (``default`` runs ``--yolo``: headless
        cannot ask)."""
        if mode not in PERMISSION_MODES:
            raise self._unsupported("set_permission_mode", f"unknown mode {mode!r}")
        self.permission_mode = mode
