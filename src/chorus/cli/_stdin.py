"""A job's prompt from the command line and a piped stdin, as ``claude -p`` and
``codex exec`` take them: ``chorus ask -`` reads the whole prompt from stdin;
``git diff | chorus ask "review this"`` attaches what was piped to the prompt.

Only a pipe or a redirected file counts as piped input (a terminal, ``/dev/null``
or a socket never does). A pipe that stays silent for :data:`FIRST_BYTE_WAIT`
seconds is left alone with a note (a parent that holds a pipe open and never
writes would otherwise hang the command); ``-`` waits as long as it takes.
Text that is not UTF-8, from either place, is bad input (exit 2) with its
position.
"""

from __future__ import annotations

import os
import select
import stat
import sys

from chorus._errors import UserError

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import BinaryIO

#: Seconds a piped stdin may stay silent before it is ignored (prompt argument given).
FIRST_BYTE_WAIT = 3.0
#: The word that asks for the prompt itself from stdin.
FROM_STDIN = "-"


def job_prompt(prompt: str, stdin: BinaryIO | None = None) -> str:
    """The prompt to send: ``prompt`` checked, with a piped stdin read as it says."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    if prompt == FROM_STDIN:
        return _decode(stdin.read(), "stdin")
    checked = _checked_argument(prompt)
    piped = _piped(stdin)
    return f"{checked}\n\n<stdin>\n{piped}\n</stdin>" if piped else checked


def _checked_argument(prompt: str) -> str:
    """``prompt`` as given on the command line; bytes that were not UTF-8 reach
    Python as lone surrogates, refused here with their byte position."""
    return _decode(prompt.encode("utf-8", "surrogateescape"), "the prompt")


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{where} is not valid UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); "
            "convert it first, e.g. with iconv -f latin1 -t utf-8"
        ) from None


def _piped(stdin: BinaryIO) -> str:
    """What a pipe or redirected file on ``stdin`` holds ('' for anything else)."""
    try:
        fd = stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return ""
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return ""
    if stat.S_ISFIFO(mode) and not _ready(fd):
        _note(
            f"stdin stayed silent for {FIRST_BYTE_WAIT:.0f} s; going on without it "
            "(use `-` as the prompt to wait for it, or `< /dev/null` to skip)"
        )
        return ""
    return _decode(stdin.read(), "stdin").strip("\n")


def _ready(fd: int) -> bool:
    readable, _, _ = select.select([fd], [], [], FIRST_BYTE_WAIT)
    return bool(readable)


def _note(message: str) -> None:
    sys.stderr.write(f"note: {message}\n")
