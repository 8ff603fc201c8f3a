"""The one-shot Claude body: ``claude -p --output-format stream-json --verbose``, the
prompt on stdin.

Each turn is its own process; the first names the session's id (``--session-id``,
chosen by Chorus) and the next ones resume it (``--resume``). Same codec as the
bidirectional body. There is no stdin channel, so no permission callback: tools the
permission mode does not allow are refused by the CLI itself, in its own words (they show in
``permission_denials``); the session logs the policy's rule and reason for such a
refusal and the model is told with the next prompt.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import ClassVar

from chorus._errors import BodyError
from chorus.bodies._body import (
    Body,
    BodyOptions,
    crash_error,
    interrupt_group,
    wait_task,
)
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._inject import claude_args
from chorus.bodies._lifecycle import BodyState
from chorus.bodies._transport import ProcessTransport
from chorus.bodies.claude._codec import ClaudeCodec
from chorus.bodies.claude._spawn import PRINT_FLAGS, executable, session_flags, spawn_spec
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Notice,
    SessionEnded,
    TurnCompleted,
    TurnFailed,
)

#: How long a new turn waits for the previous turn's process to exit.
_EXIT_WAIT = 10.0


class ClaudePrintBody(Body):
    """Claude Code in print mode, one process per turn (the one-shot fallback)."""

    name: ClassVar[str] = "claude-print"
    replaces_system_prompt: ClassVar[bool] = True  # --system-prompt
    long_lived: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities(
        interrupt=Support.EMULATED,  # signal the process group
        set_model=Support.EMULATED,  # --model on the next turn's process
        set_permission_mode=Support.EMULATED,
        max_thinking_tokens=Support.UNSUPPORTED,
        steer=Support.UNSUPPORTED,
        permission_callback=Support.UNSUPPORTED,
        resume=Support.NATIVE,
        fork=Support.UNSUPPORTED,
        usage=Support.NATIVE,
        cost=Support.NATIVE,
        rate_limit_signal=Support.NATIVE,
        denial_reason=Support.UNSUPPORTED,  # the CLI's own refusal; told with the next prompt
    )

    def __init__(self, options: BodyOptions) -> None:
        super().__init__(options)
        self.native_session_id = None
        self._resume = options.resume
        self._codec = ClaudeCodec()
        self._runner: asyncio.Task[None] | None = None

    async def _spawn(self) -> None:
        """Check that the CLI exists; processes start per turn."""
        executable(self.options)

    async def _shutdown(self) -> None:
        """Stop a running turn (bounded) and emit ``SessionEnded``."""
        await self.interrupt()
        if self._runner is not None:
            await self._runner  # surfaces a failure of the last turn's reader
        await self._emit(SessionEnded(reason="closed"))

    async def _send_prompt(self, prompt: str) -> None:
        await self._previous_turn_exited()
        self._begin_turn()
        resume = self.native_session_id or self._resume
        try:
            transport = await self._spawn_turn(prompt, resume)
        except BaseException:
            self._end_turn()
            raise
        self._runner = asyncio.create_task(self._whole_turn(transport, prompt, resume))

    async def _whole_turn(
        self, transport: ProcessTransport, prompt: str, resume: str | None
    ) -> None:
        try:
            await self._finish_turn(transport, prompt, resume)
        finally:
            self._end_turn()

    async def _previous_turn_exited(self) -> None:
        """The last turn's process exits just after its result; wait for it, bounded."""
        runner = self._runner
        if runner is None or runner.done():
            return
        if not await wait_task(runner, _EXIT_WAIT):
            raise BodyError("claude-print runs one turn at a time; the last one still runs")

    def _argv(self, resume: str | None, new_id: str | None = None) -> list[str]:
        policy_args = self.options.permission_args
        mode = None if policy_args is not None else self.permission_mode
        flags = session_flags(model=self.model, permission_mode=mode, resume=resume)
        flags += ["--session-id", new_id] if new_id and not resume else []
        flags += policy_args or ()
        # The prompt goes on stdin (see _spawn): no size limit, never read as a flag.
        return [
            str(executable(self.options)),
            "-p",
            *PRINT_FLAGS,
            "--include-partial-messages",
            *flags,
            *claude_args(self.options),
            *self.options.extra_args,
        ]

    async def _spawn_turn(self, prompt: str, resume: str | None) -> ProcessTransport:
        """Start the turn's process and write the prompt to its stdin (``claude -p``
        reads the prompt from stdin when none is given; argv is capped at 128 KiB). A new
        session gets its id from Chorus (``--session-id``): it is known from the start,
        so a turn killed before the CLI said it can still be resumed."""
        new_id = None if resume else str(uuid.uuid4())
        spec = spawn_spec(self.options, self._argv(resume, new_id))
        transport = ProcessTransport(spec, tap=self.options.raw_tap)
        await transport.start()
        self._transport = transport
        self.native_session_id = self.native_session_id if resume else new_id
        await transport.send_input(prompt)
        return transport

    async def _finish_turn(
        self, transport: ProcessTransport, prompt: str, resume: str | None
    ) -> None:
        """Read the turn's process to its end; retry once fresh if the resume was refused."""
        ended, resume_failed = await self._pump(transport, resume is not None)
        code = await transport.close()
        if resume_failed and not self._stopping:
            await self._emit(_fallback_notice(resume))
            await self._resumed(False, f"Claude session {resume} was not found")
            prompt = self._with_history(prompt)
            self._resume = None
            await self._finish_turn(await self._spawn_turn(prompt, None), prompt, None)
        elif not ended:
            await self._emit(TurnFailed(error=self._no_result_error(code, transport)))

    async def _pump(self, transport: ProcessTransport, resuming: bool) -> tuple[bool, bool]:
        """Feed stdout to the codec; (saw a terminal event, the resume was refused)."""
        ended = refused = False
        async for line in transport.lines():
            for event in self._codec.feed(line):
                if resuming and self._codec.is_resume_failure(event):
                    refused = True
                    continue
                ended = ended or isinstance(event, TurnCompleted | TurnFailed)
                await self._observe_and_emit(event)
        return ended, refused

    async def _observe_and_emit(self, event: Event) -> None:
        if self._codec.session_id is not None:
            self.native_session_id = self._codec.session_id
        await self._emit(event)

    def _no_result_error(self, code: int | None, transport: ProcessTransport) -> ErrorInfo:
        if self._stopping:
            return ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted", retryable=True)
        return crash_error(code, transport.stderr_tail)

    async def interrupt(self) -> None:
        """SIGINT the turn's process group, then escalate; returns when the turn ended."""
        runner, transport = self._runner, self._transport
        if runner is None or runner.done() or transport is None:
            return
        if self._life.state is BodyState.BUSY:
            self._life.to(BodyState.INTERRUPTING)
        await interrupt_group(runner, transport, self.options.interrupt_timeout)

    async def set_model(self, model: str | None) -> None:
        """Takes effect on the next turn (a new process with ``--model``)."""
        self.model = model

    async def set_permission_mode(self, mode: str) -> None:
        """Takes effect on the next turn (a new process with ``--permission-mode``)."""
        self.permission_mode = mode


def _fallback_notice(resume: str | None) -> Notice:
    return Notice(
        message=f"Claude session {resume} was not found; started a new session",
        kind="resume_fallback",
    )
