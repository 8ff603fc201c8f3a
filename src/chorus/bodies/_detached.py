"""A transport whose process outlives the one that started it.

The CLI runs under a tiny ``sh`` wrapper, in its own session and process group,
with no pipe to us: stdout and stderr are appended to files in the body's run
directory, stdin is a named pipe that the wrapper itself holds open for writing
(so the CLI never sees end-of-file when we go), and the wrapper writes the CLI's
exit status to a file when it ends. No relay process of ours stays behind.

We read stdout by offset: :attr:`DetachedTransport.offset` is the byte position
after the last line :meth:`~DetachedTransport.lines` yielded. A new process
re-attaches with :meth:`DetachedTransport.attach` given the directory, the
wrapper's pid and start time (so a reused pid is never taken for ours) and that
offset, and carries on reading where the old one stopped.

Files in the run directory: ``stdin`` (FIFO), ``stdout``, ``stderr``, ``exit``
(the CLI's status, written when it ends), ``pid`` (the wrapper's pid and start
time, written by us), ``owner`` (the pid of the process reading the body),
``sent`` (each line we wrote, with the size of stdout then), ``head`` (where the
part of stdout kept for good ends, see ``discard_before``).

No body outlives its owner for long: with ``SpawnSpec.orphan_timeout`` the wrapper
checks now and then that the ``owner`` process lives, and ends the body after that
long without one (a daemon killed with SIGKILL leaves its bodies to be re-attached,
not forever); :func:`end_detached` ends the bodies of a run directory with no owner
(``chorus stop`` with no daemon running).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path

from chorus._errors import BodyCrashedError, BodyTimeoutError, LineTooLongError
from chorus._libc import libc_with
from chorus._procs import start_time as start_time
from chorus.bodies._framing import LineFramer
from chorus.bodies._group import signal_members
from chorus.bodies._transport import AgentTransport, ProcessTransport, RawTap, SpawnSpec
from chorus.bodies._wake import FileWake
from chorus.config import body_umask

#: TERM to the wrapper's group (the orphan watch's first step) as
#: :func:`~chorus.bodies._group.signal_members` sends it: not to the wrapper, nor to
#: the sandbox around the CLI (a process running the ``bwrap`` binary; its ``comm``
#: where its ``exe`` cannot be read), which would die of it and the CLI be killed in
#: its cleanup. Without ``/proc``: to the whole group.
_TERM = (
    'term() { [ -d "/proc/$$" ] || { kill -TERM 0; return; }; bw=$(command -v bwrap); '
    'for d in /proc/[0-9]*; do p=${d#/proc/}; l=; read -r l <"$d/stat" || continue; '
    'set -- ${l##*)}; { [ "$3" = "$$" ] && [ "$p" != "$$" ]; } || continue; c=; '
    'if [ -e "$d/exe" ]; then [ -n "$bw" ] && [ "$d/exe" -ef "$bw" ] && continue; '
    'else read -r c <"$d/comm"; [ "$c" = bwrap ] && continue; fi; kill -TERM "$p"; '
    "done; }; "
)
#: The orphan watch (a background function of the wrapper, in its group): every
#: ``$tick`` seconds it checks that the process named in the ``owner`` file (the one
#: reading the body, our process) lives; after ``$lim`` seconds with none it ends the
#: body (TERM to the CLI, see ``_TERM``; KILL to the group 5 s later). It ignores the
#: signals sent to the group.
_WATCH = (
    f'{_TERM}watch() {{ trap "" TERM INT HUP; left=$lim; while sleep "$tick"; do o=; '
    'read -r o <"$own"; if [ -n "$o" ] && kill -0 "$o"; then left=$lim; '
    "else left=$((left - tick)); fi; if [ $left -le 0 ]; then "
    'echo "chorus: no owner for ${lim}s; the body was ended" >>"$err"; '
    "term; sleep 5; kill -KILL 0; fi; done; }; "
)
#: The wrapper: hold the FIFO open read-write on fd 3, start the orphan watch (when
#: ``$lim`` > 0), run the CLI with the FIFO as stdin and the files as stdout/stderr,
#: then record its status and end the whole process group (itself last): a child the
#: CLI left behind (Codex's native app-server when its ``node`` launcher dies) would
#: hold the session, and a resume would fail. A TERM/INT handler (not "ignore",
#: which the CLI would inherit) keeps the wrapper alive to write the status.
_WRAPPER = (
    'trap "true" TERM INT HUP; exec 3<>"$1"; out=$2; err=$3; ex=$4; own=$5; lim=$6; '
    f"tick=$7; shift 7; {_WATCH}"
    'if [ "$lim" -gt 0 ]; then watch </dev/null >/dev/null 2>&1 3>&- & fi; '
    '"$@" <&3 3>&- >>"$out" 2>>"$err"; code=$?; '
    'umask 077; echo "$code" >"$ex.tmp"; mv "$ex.tmp" "$ex"; kill -KILL 0'
)
_POLL = 0.02
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class BodyHandle:
    """What re-attaching to a running body needs; the session persists it."""

    run_dir: Path
    pid: int
    started: int | None
    #: Byte offset in stdout of the first line not yet fully handed out, and how many
    #: of that line's events were (a line may decode to several events).
    offset: int = 0
    skip: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "run_dir": str(self.run_dir),
            "pid": self.pid,
            "started": self.started,
            "offset": self.offset,
            "skip": self.skip,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> BodyHandle:
        started = data.get("started")
        return cls(
            Path(str(data["run_dir"])),
            int(str(data["pid"])),
            int(str(started)) if started is not None else None,
            int(str(data.get("offset", 0))),
            int(str(data.get("skip", 0))),
        )


#: Detached bodies this process runs and has neither closed nor left running on
#: purpose (``detach``): :func:`kill_detached_left` ends them with the daemon.
_RUNNING: weakref.WeakSet[DetachedTransport] = weakref.WeakSet()


def kill_detached_left() -> int:
    """SIGKILL the group of every detached body still ours (the daemon's last step on
    shutdown; ``chorus stop --keep-bodies`` detached its bodies before). Each group is
    checked to be the same process first. Returns how many were signalled."""
    left = list(_RUNNING)
    for transport in left:
        transport.signal_group(signal.SIGKILL)
    _RUNNING.clear()
    return len(left)


async def start_transport(
    spec: SpawnSpec, run_dir: Path | None, tap: RawTap | None = None
) -> AgentTransport:
    """The CLI's process, started: detached (outliving the daemon) when the
    body has a ``run_dir``, else on pipes."""
    transport: DetachedTransport | ProcessTransport
    if run_dir is not None:
        transport = DetachedTransport(spec, run_dir, tap=tap)
    else:
        transport = ProcessTransport(spec, tap=tap)
    await transport.start()
    return transport


class DetachedTransport:
    """Same surface as :class:`ProcessTransport` (``lines``, ``write_line``, ``wait``,
    ``close``, ``signal_group``), plus :attr:`offset`, :meth:`handle`, :meth:`detach`
    and :meth:`attach`."""

    def __init__(self, spec: SpawnSpec, run_dir: Path, tap: RawTap | None = None) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self._tap = tap
        self._pid: int | None = None
        self._started: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stdin_fd: int | None = None
        self._stderr: deque[str] = deque(maxlen=spec.stderr_tail_lines)
        self._stderr_task: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self.offset = 0
        self._quiet = 0  # empty polls of stdout in a row (see _idle_wait)
        self._detached = False
        self._closed = False

    # -- paths ---------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self.run_dir / name

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Make the run directory, spawn the wrapper in its own session and open the
        stdin pipe (:meth:`_open_stdin`); a wrapper that never opens it within
        ``spec.start_timeout`` is ended and spawned once more (nothing was written to
        it yet). Raises :class:`BodyCrashedError` or :class:`BodyTimeoutError`."""
        try:
            await self._spawn()
        except BodyTimeoutError:
            await self._abandon()
            await self._spawn()
        self._stderr_task = asyncio.create_task(self._follow_stderr(0))
        _RUNNING.add(self)

    async def _abandon(self) -> None:
        """End a spawned wrapper that got stuck, with its whole group (bounded)."""
        self.signal_group(signal.SIGKILL)
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5.0)

    async def _spawn(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for name in ("stdout", "stderr", "exit", "stdin", "sent", "head"):
            self._path(name).unlink(missing_ok=True)
        os.mkfifo(self._path("stdin"), 0o600)
        self._path("stdout").touch(0o600)
        self._path("stderr").touch(0o600)
        self._own()
        files = [str(self._path(n)) for n in ("stdin", "stdout", "stderr", "exit", "owner")]
        files += _watch_args(self.spec.orphan_timeout)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                _WRAPPER,
                "sh",
                *files,
                *self.spec.argv,
                cwd=str(self.spec.cwd),
                env=dict(self.spec.env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
                umask=body_umask(),
            )
        except OSError as exc:
            raise BodyCrashedError(
                f"could not start {self.spec.argv[0]}: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        self._pid = self._proc.pid
        self._started = start_time(self._pid)
        self._path("pid").write_text(json.dumps({"pid": self._pid, "started": self._started}))
        try:
            await self._open_stdin()
        except BodyTimeoutError:
            await self._abandon()
            raise

    @classmethod
    async def attach(
        cls, spec: SpawnSpec, handle: BodyHandle, tap: RawTap | None = None
    ) -> DetachedTransport:
        """Re-attach to the body of ``handle``: reading stdout from ``handle.offset``.

        Raises :class:`BodyCrashedError` when that very process is gone (its pid
        absent or now another process's) or its output file was removed or cut
        below the offset.
        """
        transport = cls(spec, handle.run_dir, tap)
        transport._pid, transport._started = handle.pid, handle.started
        transport.offset = handle.offset
        if not transport._same_process():
            transport._end_group()  # what the CLI left behind, if it left anything
            raise BodyCrashedError(
                f"body process {handle.pid} is gone",
                exit_code=transport._exit_code(),
                stderr_tail="",
            )
        transport._check_output()
        transport._own()
        await transport._open_stdin()
        transport._stderr_task = asyncio.create_task(transport._follow_stderr(None))
        _RUNNING.add(transport)
        return transport

    def _own(self) -> None:
        """Name this process as the body's owner, for the wrapper's orphan watch."""
        with contextlib.suppress(OSError):
            self._path("owner").write_text(f"{os.getpid()}\n")

    def _same_process(self) -> bool:
        """Our wrapper still runs: our own child until it is reaped (its pid is not
        reused before), else its pid exists with the start time we recorded. The
        readers ask at each quiet poll: the child's status costs no read of
        ``/proc`` (25 µs a poll before)."""
        if self._proc is not None:
            return self._proc.returncode is None
        if self._pid is None or self._started is None:
            return False
        return start_time(self._pid) == self._started

    def _check_output(self) -> None:
        try:
            size = self._path("stdout").stat().st_size
        except OSError as exc:
            raise BodyCrashedError(
                f"body output file is gone: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        if size < self.offset:
            raise BodyCrashedError(
                f"body output file was cut to {size} bytes, below offset {self.offset}",
                exit_code=None,
                stderr_tail="",
            )

    async def _open_stdin(self) -> None:
        """Open our end of the stdin pipe, which the wrapper holds open for reading as
        soon as it runs: wait while it runs and has not yet (on a loaded machine that
        takes seconds), up to ``spec.start_timeout``. A CLI that has ended meanwhile
        has no stdin (its output is still read; a write to it is a crash). Raises
        :class:`BodyTimeoutError` past the deadline, naming the step."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.start_timeout
        while True:
            self._stdin_fd = _open_writer(self._path("stdin"))
            if self._stdin_fd is not None or self._ended():
                return
            if loop.time() >= deadline:
                raise BodyTimeoutError(
                    f"{Path(self.spec.argv[0]).name}: its stdin pipe was not opened within "
                    f"{self.spec.start_timeout:g}s (step: stdin pipe; its wrapper, pid "
                    f"{self._pid}, still runs)"
                )
            await asyncio.sleep(_POLL)

    def handle(self) -> BodyHandle:
        """Where to re-attach: the directory, the wrapper's identity, the read offset."""
        assert self._pid is not None
        return BodyHandle(self.run_dir, self._pid, self._started, self.offset)

    # -- state ---------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._pid

    def _exit_code(self) -> int | None:
        try:
            return int(self._path("exit").read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def returncode(self) -> int | None:
        return self._exit_code()

    @property
    def running(self) -> bool:
        return self._exit_code() is None and self._same_process()

    @property
    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    # -- reading ---------------------------------------------------------------------

    def _ended(self) -> bool:
        return self._exit_code() is not None or not self._same_process()

    async def lines(self) -> AsyncGenerator[str, None]:
        """Yield stdout lines from :attr:`offset` on, until the CLI has ended and its
        output is read; :attr:`offset` is the byte just after each yielded line."""
        buf = bytearray()
        wake = FileWake(self._path("stdout"))  # a write ends the idle wait at once
        with contextlib.closing(wake), self._path("stdout").open("rb") as out:
            out.seek(self.offset)
            while not self._detached:
                chunk = out.read(_CHUNK)
                if not chunk:
                    if self._ended() and not out.read(1):
                        self._end_group()
                        return
                    if (lost := self._lost(out.fileno(), out.tell())) is not None:
                        self._give_up(lost)
                        return
                    await self._idle_wait(wake)
                    continue
                self._quiet = 0
                buf += chunk
                while (line := self._take_line(buf)) is not None:
                    if line:
                        yield line[0]

    async def _idle_wait(self, wake: FileWake) -> None:
        """Wait before looking at stdout again: until it is written (``_wake``), or else
        20 ms at first, doubling while it stays quiet, at most 320 ms (an idle warm
        body costs a few reads a second); any output or any line we write makes it
        20 ms again."""
        await wake.wait(_POLL * (1 << min(self._quiet, 4)))
        self._quiet += 1

    def _lost(self, fd: int, position: int) -> str | None:
        """Why the body's output can no longer be read by offset, if it cannot: its
        file removed or replaced (another inode at its path) or truncated below what
        we read, or no room left for the CLI to write it (a full disk: its lines are
        being lost)."""
        try:
            now = self._path("stdout").stat()
            room = os.fstatvfs(fd).f_bfree
        except OSError:
            return "the body's output file was removed"
        if room == 0:
            return "the disk holding the body's output is full"
        mine = os.fstat(fd)
        if now.st_ino != mine.st_ino or now.st_dev != mine.st_dev:
            return "the body's output file was replaced"
        if mine.st_size < position:
            return f"the body's output file was truncated to {mine.st_size} bytes"
        return None

    def _give_up(self, reason: str) -> None:
        """The output is lost to us: say why (in the stderr tail the crash reports)
        and end the body, whose end is then read as a crash."""
        self._stderr.append(f"chorus: {reason}; the body was ended")
        self.signal_group(signal.SIGKILL)

    def _take_line(self, buf: bytearray) -> tuple[str] | tuple[()] | None:
        """The first complete line of ``buf`` (removed from it), advancing
        :attr:`offset` past it: ``(line,)``, ``()`` for an oversized line (skipped),
        ``None`` when no line is complete."""
        idx = buf.find(b"\n")
        if idx < 0:
            return None
        raw = bytes(buf[:idx])
        del buf[: idx + 1]
        self.offset += idx + 1
        if len(raw) > self.spec.max_line_bytes:
            return ()
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        self._emit("stdout", line)
        return (line,)

    async def _follow_stderr(self, start: int | None) -> None:
        path = self._path("stderr")
        framer = LineFramer(1 << 20)
        with contextlib.suppress(OSError), path.open("rb") as err:
            err.seek(0 if start is not None else path.stat().st_size)
            while not self._detached:
                chunk = err.read(_CHUNK)
                if not chunk:
                    if self._ended():
                        return
                    await asyncio.sleep(_POLL * 5)
                    continue
                for line in framer.feed(chunk):
                    self._stderr.append(line)
                    self._emit("stderr", line)

    def _emit(self, stream: str, line: str) -> None:
        if self._tap is not None:
            self._tap(stream, line)

    async def wait(self, timeout: float | None = None) -> int | None:  # noqa: ASYNC109
        """Wait for the CLI's exit status (``None`` on timeout, or if the wrapper died
        without writing one)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            code = self._exit_code()
            if code is not None or not self._same_process():
                self._end_group()
                self._reap()
                return code if code is not None else self._exit_code()
            if deadline is not None and loop.time() >= deadline:
                return None
            await asyncio.sleep(_POLL)

    def _reap(self) -> None:
        """Our own child (not after a re-attach): collect it so it leaves no zombie."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.waitpid(self._proc.pid, os.WNOHANG)

    # -- writing ---------------------------------------------------------------------

    async def write_line(self, line: str) -> None:
        """Write one line plus ``\\n`` into the FIFO. Raises :class:`BodyCrashedError`
        when the CLI is gone: before the write, or during it (it may end between the
        check and the write: the FIFO then has no reader)."""
        if "\n" in line:
            raise ValueError("a line written to a body must not contain a newline")
        if len(line) > self.spec.max_line_bytes:
            raise LineTooLongError(self.spec.max_line_bytes)
        fd = self._stdin_fd
        if fd is None or not self.running:
            raise self._gone("agent process is not running")
        async with self._write_lock:
            self._emit("stdin", line)
            self._log_sent(line)
            self._quiet = 0  # an answer is due: look often again
            data = line.encode("utf-8") + b"\n"
            try:
                if not _written_now(fd, data):  # a full pipe: wait for room in a thread
                    await asyncio.to_thread(_write_all, fd, data)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise self._gone(f"agent stdin closed: {exc}") from exc

    def _gone(self, why: str) -> BodyCrashedError:
        """The error of a write to a CLI that has ended, with its exit code and stderr."""
        tail = self.stderr_tail or _tail(self._path("stderr"))
        return BodyCrashedError(why, exit_code=self.returncode, stderr_tail=tail)

    def _log_sent(self, line: str) -> None:
        """Keep what we wrote, with the size stdout had then (``sent`` file): a new
        owner replays it in order with stdout to rebuild a codec that pairs answers
        with its requests (:func:`sent_lines`)."""
        try:
            at = self._path("stdout").stat().st_size
            with self._path("sent").open("a", encoding="utf-8") as sent:
                sent.write(json.dumps({"at": at, "line": line}) + "\n")
        except OSError:
            pass  # best effort: a rebuild without it pairs fewer answers

    # -- signals, detach and shutdown ----------------------------------------------------

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the body's process group, its sandbox spared (see
        :func:`_signal_group`)."""
        if self._pid is not None:
            _signal_group(self._pid, self._started, sig)

    def _end_group(self) -> None:
        """The CLI ended: SIGKILL whatever it left in its group (a child holding its
        session would make a resume fail) before anyone acts on its end."""
        self.signal_group(signal.SIGKILL)

    async def detach(self) -> BodyHandle:
        """Stop reading and writing, leave the body running; its handle to re-attach."""
        self._detached = True
        _RUNNING.discard(self)
        handle = self.handle()
        self._release()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            await asyncio.gather(self._stderr_task, return_exceptions=True)
        return handle

    def discard_before(self, offset: int) -> None:
        """Erase stdout before ``offset`` (stored, and redacted, by now) and the stderr
        so far, without moving any offset: whole pages are deallocated (the files
        become sparse), the rest is overwritten with zero bytes, which a rebuild
        skips; the CLI keeps appending. So no secret a tool printed stays on disk
        once the log has it. The first call only records its offset as the *head*
        (the CLI's handshake and session opening, which a rebuilt codec needs),
        kept for good."""
        head = self._head()
        if head is None:
            with contextlib.suppress(OSError):
                self._path("head").write_text(str(offset))
            return
        _erase(self._path("stdout"), head, offset)
        with contextlib.suppress(OSError):
            _erase(self._path("stderr"), 0, self._path("stderr").stat().st_size)

    def _head(self) -> int | None:
        try:
            return int(self._path("head").read_text())
        except (OSError, ValueError):
            return None

    def _release(self) -> None:
        if self._stdin_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._stdin_fd)
            self._stdin_fd = None

    async def close(self, *, grace: float = 2.0, term_wait: float = 3.0) -> int | None:
        """SIGTERM, then SIGKILL, the group (bounded); remove the run directory."""
        if self._closed:
            return self._exit_code()
        self._closed = True
        code = None
        if self.running:
            self.signal_group(signal.SIGTERM)
            code = await self.wait(grace + term_wait)
        if code is None and self._same_process():
            self.signal_group(signal.SIGKILL)
            code = await self.wait(5.0)
        self._end_group()
        code = code if code is not None else self._exit_code()
        self._detached = True
        _RUNNING.discard(self)
        self._release()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            await asyncio.gather(self._stderr_task, return_exceptions=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return code


def _signal_group(pid: int, started: int | None, sig: int) -> bool:
    """Send ``sig`` to the process group of the wrapper ``pid`` started at ``started``:
    while it runs, and after it ended too (to what its CLI left in the group), never
    once ``pid`` is another process's (a group's id stays taken while any member
    lives, so a reused pid means that our group is empty). True when sent. Any signal
    but SIGKILL spares the wrapper (it traps them) and the sandbox around the CLI
    (see :func:`~chorus.bodies._group.signal_members`): the CLI's own end ends them."""
    now = start_time(pid)
    if started is None or (now is not None and now != started):
        return False
    return signal_members(pid, sig, spare=(pid,))


def end_detached(run_dir: Path, grace: float = 3.0) -> bool:
    """End the body that runs (or whose group lives on) in ``run_dir``, as its pid
    file names it, with no owner reading it: SIGTERM to its group, SIGKILL after up
    to ``grace`` seconds. A pid now another process's is never signalled. Returns
    True when there was one to end. Its files are left for the next owner (whose
    re-attach then finds it gone, and resumes its session natively)."""
    try:
        data = json.loads((run_dir / "pid").read_text())
        pid, started = int(data["pid"]), data["started"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    started = int(started) if isinstance(started, int) else None
    if not _signal_group(pid, started, signal.SIGTERM):
        return False
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _signal_group(pid, started, 0):
        time.sleep(0.05)
    _signal_group(pid, started, signal.SIGKILL)
    return True


def _watch_args(timeout: float | None) -> list[str]:
    """The wrapper's ``$lim`` and ``$tick`` (whole seconds; ``0``: no watch): a check
    every tenth of the timeout, at least every second and at most every 30 s."""
    if not timeout or timeout <= 0:
        return ["0", "1"]
    limit = max(1, round(timeout))
    return [str(limit), str(max(1, min(30, limit // 10)))]


def _open_writer(fifo: Path) -> int | None:
    """A blocking write end of ``fifo``, or ``None`` while nobody holds it open for
    reading (a non-blocking open fails then, instead of waiting)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None
    os.set_blocking(fd, True)
    return fd


def _tail(path: Path, size: int = 4096) -> str:
    """The last ``size`` bytes of ``path`` as text ("" when it cannot be read)."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - size))
            return file.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def _written_now(fd: int, data: bytes) -> bool:
    """Write ``data`` at once when the pipe has room for all of it: a write of at most
    ``PIPE_BUF`` bytes is whole, and with a free page in the pipe never blocks (most
    lines: a user message, a permission's answer). False when it was not written."""
    if len(data) > select.PIPE_BUF:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    if not poller.poll(0):
        return False
    _write_all(fd, data)
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def replay_lines(run_dir: Path, offset: int) -> tuple[list[tuple[str, str]], list[Sent]]:
    """What passed through a detached body before stdout ``offset``, in order:
    ``("stdin", line)`` for each line written to it, ``("stdout", line)`` for each it
    printed (a codec is rebuilt from these); and the lines written later, each with
    the stdout size when it was written. Raises ``OSError`` when stdout is gone."""
    sent = _sent(run_dir)
    merged: list[tuple[str, str]] = []
    position = 0
    for raw in _raw_lines_before(run_dir, offset):
        while sent and sent[0][0] <= position:
            merged.append(("stdin", sent.pop(0)[1]))
        if b"\0" not in raw:  # not cut by a punched hole (see discard_before)
            merged.append(("stdout", raw.decode("utf-8", errors="replace").rstrip("\r")))
        position += len(raw) + 1
    merged += [("stdin", line) for at, line in sent if at < offset]
    return merged, [(at, line) for at, line in sent if at >= offset]


#: A line written to a detached body, with the size of its stdout then.
Sent = tuple[int, str]


def _sent(run_dir: Path) -> list[Sent]:
    try:
        text = (run_dir / "sent").read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for row in text.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            data = json.loads(row)
            out.append((int(data["at"]), str(data["line"])))
    return out


_PAGE = 4096
#: fallocate(2) flags: FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE.
_PUNCH_HOLE = 0x01 | 0x02


def _erase(path: Path, start: int, end: int) -> None:
    """Make bytes ``start``..``end`` of ``path`` read as zeros: whole pages punched out
    where the filesystem can, the rest (and everything, where it cannot) written over."""
    first = -(-start // _PAGE) * _PAGE
    last = end - end % _PAGE
    punched = first < last and _punch(path, first, end)
    spans = [(start, first), (last, end)] if punched else [(start, end)]
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        for a, b in spans:
            for at in range(a, b, _CHUNK):
                os.pwrite(fd, bytes(min(_CHUNK, b - at)), at)
    except OSError:
        pass
    finally:
        os.close(fd)


def _punch(path: Path, start: int, end: int) -> bool:
    """Deallocate ``path``'s whole pages from ``start`` (page-aligned) to before ``end``;
    False where that cannot be done."""
    length = end - end % _PAGE - start
    if length <= 0:
        return False
    libc = libc_with("fallocate")
    if libc is None:
        return False
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        done = libc.fallocate(fd, _PUNCH_HOLE, ctypes.c_long(start), ctypes.c_long(length))
        return int(done) == 0
    finally:
        os.close(fd)


def _raw_lines_before(run_dir: Path, offset: int) -> list[bytes]:
    with (run_dir / "stdout").open("rb") as out:
        seen = out.read(offset)
    return seen.split(b"\n")[:-1]


def stdout_before(run_dir: Path, offset: int) -> list[str]:
    """The stdout lines before ``offset`` that are still there (not punched out).
    Raises ``OSError`` when stdout is gone."""
    return [
        raw.decode("utf-8", errors="replace").rstrip("\r")
        for raw in _raw_lines_before(run_dir, offset)
        if b"\0" not in raw
    ]
