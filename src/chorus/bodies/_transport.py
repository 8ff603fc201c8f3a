"""The process transport every body shares: spawn, frame, read, write, shut down.

It only moves lines. It never interprets them (that is the codec's job) and
never decides what to write (that is the session's). Stdout and stderr are read
concurrently; stderr is kept as a bounded tail for error messages.

Shutdown is bounded and escalating: close stdin, wait, SIGTERM the process
group (but the sandbox around the CLI, which ends with it), wait, SIGKILL the
group, reap. Every step has a timeout. When the leader exits, by itself or not,
whatever is left in its group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from chorus._errors import BodyCrashedError, LineTooLongError
from chorus.bodies._framing import MAX_LINE_BYTES, LineFramer
from chorus.bodies._group import signal_members
from chorus.config import body_umask

#: Called with ("stdout" | "stderr" | "stdin", line) for every line moved.
RawTap = Callable[[str, str], None]

_EOF = object()


def _grow_stdout_pipe(proc: asyncio.subprocess.Process, size: int) -> None:
    """Best effort: F_SETPIPE_SZ on the child's stdout pipe (Linux only)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    transport = getattr(proc, "_transport", None)
    pipe = transport.get_pipe_transport(1) if transport is not None else None
    fileobj = pipe.get_extra_info("pipe") if pipe is not None else None
    if setsize is None or fileobj is None:
        return
    for wanted in (size, _pipe_max()):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fileobj.fileno(), setsize, min(size, wanted))
            return


def _pipe_max() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return 1 << 20


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once ``proc`` has exited, its pipes open or not: its pidfd becomes
    readable (Linux 5.3+), else its status is polled."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        while True:
            if proc.returncode is not None:
                return
            await asyncio.sleep(0.2)
    if proc.returncode is not None:  # reaped already (the pid may be another's now)
        os.close(fd)
        return
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    loop.add_reader(fd, readable.set)
    try:
        await readable.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


class AgentTransport(Protocol):
    """What a body needs of its process: :class:`ProcessTransport` (pipes) and
    ``DetachedTransport`` (files and a FIFO, outliving us) both provide it."""

    @property
    def pid(self) -> int | None: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def running(self) -> bool: ...

    @property
    def stderr_tail(self) -> str: ...

    def lines(self) -> AsyncIterator[str]: ...

    async def write_line(self, line: str) -> None: ...

    async def wait(self, timeout: float | None = None) -> int | None: ...  # noqa: ASYNC109

    def signal_group(self, sig: int) -> None: ...

    async def close(self, *, grace: float = 2.0, term_wait: float = 3.0) -> int | None: ...


#: Process groups started and not yet reaped, for :func:`kill_live_groups`.
_LIVE_GROUPS: set[int] = set()


def kill_live_groups() -> list[int]:
    """SIGKILL every body process group this process started and has not closed
    (the daemon's last step on shutdown: nothing of a body may outlive it).
    Returns the groups signalled."""
    groups = sorted(_LIVE_GROUPS)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _LIVE_GROUPS.clear()
    return groups


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """What to run. ``stdin_devnull`` is for CLIs that block until EOF (codex exec)."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str]
    stdin_devnull: bool = False
    #: Grow the stdout pipe to this many bytes (Linux; capped by the system's
    #: pipe-max-size). Gemini (Node) drops output still queued when it exits, which
    #: happens once one line (the echo of a big prompt) overflows a 64 KiB pipe.
    stdout_pipe_bytes: int | None = None
    max_line_bytes: int = MAX_LINE_BYTES
    stderr_tail_lines: int = 200
    #: A detached body (``DetachedTransport``) with no live owner this many seconds
    #: ends itself (``None`` or 0: never).
    orphan_timeout: float | None = None
    #: Longest wait for each step of a start while the process runs (a detached body's
    #: stdin pipe, the CLI's handshake).
    start_timeout: float = 60.0


class ProcessTransport:
    """One agent process. Use :meth:`start`, then :meth:`lines` / :meth:`write_line`,
    then :meth:`close` (idempotent; safe after the process died by itself)."""

    def __init__(self, spec: SpawnSpec, tap: RawTap | None = None) -> None:
        self.spec = spec
        self._tap = tap
        self._proc: asyncio.subprocess.Process | None = None
        self._stdout_q: asyncio.Queue[object] = asyncio.Queue(maxsize=10_000)
        self._stderr: deque[str] = deque(maxlen=spec.stderr_tail_lines)
        self._readers: list[asyncio.Task[None]] = []
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._pgid: int | None = None
        self._framer = LineFramer(spec.max_line_bytes)
        self._leader: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Spawn the process in its own session (so signals reach the whole group)."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.spec.argv,
                cwd=str(self.spec.cwd),
                env=dict(self.spec.env),
                stdin=asyncio.subprocess.DEVNULL
                if self.spec.stdin_devnull
                else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                umask=body_umask(),
                limit=1 << 16,
            )
        except OSError as exc:
            raise BodyCrashedError(
                f"could not start {self.spec.argv[0]}: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        self._pgid = self._proc.pid
        if self.spec.stdout_pipe_bytes:
            _grow_stdout_pipe(self._proc, self.spec.stdout_pipe_bytes)
        _LIVE_GROUPS.add(self._pgid)
        assert self._proc.stdout is not None
        assert self._proc.stderr is not None
        self._readers = [
            asyncio.create_task(self._read_stdout(self._proc.stdout)),
            asyncio.create_task(self._read_stderr(self._proc.stderr)),
        ]
        self._leader = asyncio.create_task(self._end_with_leader(self._proc))

    async def _end_with_leader(self, proc: asyncio.subprocess.Process) -> None:
        """When the leader exits, end what it left in its group: a child still holding
        stdout (Codex's native app-server after its ``node`` launcher died) would keep
        :meth:`lines` from ever ending, and the session it holds from being resumed.
        (``proc.wait()`` cannot tell: it waits for the pipes to close too.)"""
        await _exited(proc)
        self._end_group()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc else None

    @property
    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    @property
    def oversized_lines(self) -> int:
        """How many stdout lines were dropped for exceeding the size cap."""
        return self._framer.dropped

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    # -- reading ---------------------------------------------------------------

    async def _read_stdout(self, stream: asyncio.StreamReader) -> None:
        framer = self._framer
        try:
            while chunk := await stream.read(1 << 16):
                for line in framer.feed(chunk):
                    self._emit("stdout", line)
                    await self._stdout_q.put(line)
            last = framer.flush()
            if last:
                self._emit("stdout", last)
                await self._stdout_q.put(last)
        finally:
            await self._stdout_q.put(_EOF)

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        framer = LineFramer(1 << 20)
        while chunk := await stream.read(1 << 16):
            for line in framer.feed(chunk):
                self._stderr.append(line)
                self._emit("stderr", line)
        last = framer.flush()
        if last:
            self._stderr.append(last)

    def _emit(self, stream: str, line: str) -> None:
        if self._tap is not None:
            self._tap(stream, line)

    async def lines(self) -> AsyncIterator[str]:
        """Yield stdout lines until the process closes stdout."""
        while True:
            item = await self._stdout_q.get()
            if item is _EOF:
                # Leave the sentinel for any other reader.
                self._stdout_q.put_nowait(_EOF)
                return
            assert isinstance(item, str)
            yield item

    async def wait(self, timeout: float | None = None) -> int | None:  # noqa: ASYNC109
        """Wait for exit (and for stderr to drain); ``None`` on timeout."""
        if self._proc is None:
            return None
        try:
            code = await asyncio.wait_for(self._proc.wait(), timeout)
        except TimeoutError:
            return None
        self._end_group()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._readers), 2.0)
        return code

    # -- writing ---------------------------------------------------------------

    async def write_line(self, line: str) -> None:
        """Write one line plus ``\\n``. Raises :class:`BodyCrashedError` if the pipe is gone."""
        if "\n" in line:
            raise ValueError("a line written to a body must not contain a newline")
        if len(line) > self.spec.max_line_bytes:
            raise LineTooLongError(self.spec.max_line_bytes)
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            raise BodyCrashedError(
                "agent process is not running",
                exit_code=self.returncode,
                stderr_tail=self.stderr_tail,
            )
        async with self._write_lock:
            self._emit("stdin", line)
            try:
                proc.stdin.write(line.encode("utf-8") + b"\n")
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise BodyCrashedError(
                    f"agent stdin closed: {exc}",
                    exit_code=self.returncode,
                    stderr_tail=self.stderr_tail,
                ) from exc

    async def send_input(self, text: str) -> None:
        """Write ``text`` to stdin, then close stdin: the prompt of a one-shot CLI, which
        reads to end-of-file (argv would fail with E2BIG above 128 KiB). Each line is
        tapped as ``stdin``. Raises :class:`BodyCrashedError` if the pipe is gone."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BodyCrashedError(
                "agent process has no stdin pipe", exit_code=self.returncode, stderr_tail=""
            )
        async with self._write_lock:
            for line in text.split("\n"):
                self._emit("stdin", line)
            try:
                proc.stdin.write(text.encode("utf-8"))
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise BodyCrashedError(
                    f"agent stdin closed before the prompt was written: {exc}",
                    exit_code=self.returncode,
                    stderr_tail=self.stderr_tail,
                ) from exc

    # -- signals and shutdown -----------------------------------------------------

    def _end_group(self) -> None:
        """The leader is gone: SIGKILL what is left of its group (e.g. a shell the
        agent started, a wrapper's child), once, while the group id is still ours."""
        if self._pgid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(self._pgid)
        self._pgid = None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the process group (Gemini ignores it on the launcher alone).
        Any signal but SIGKILL skips the sandbox around the CLI (bubblewrap, a sandboxed
        body's leader, would die of it, and the group be killed with it): the CLI's own
        end ends the sandbox (see :func:`~chorus.bodies._group.signal_members`)."""
        if self._proc is None or self._proc.returncode is not None:
            return
        signal_members(self._proc.pid, sig)

    async def close(self, *, grace: float = 2.0, term_wait: float = 3.0) -> int | None:
        """Close stdin, then SIGTERM, then SIGKILL the group, each after a bounded wait."""
        if self._proc is None:
            return None
        if not self._closed:
            self._closed = True
            if self._proc.stdin is not None and not self._proc.stdin.is_closing():
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
        code = await self.wait(grace)
        if code is None:
            self.signal_group(signal.SIGTERM)
            code = await self.wait(term_wait)
        if code is None:
            self.signal_group(signal.SIGKILL)
            code = await self.wait(5.0)
        self._end_group()
        tasks = [*self._readers, *([self._leader] if self._leader else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return code
