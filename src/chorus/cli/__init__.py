"""The ``chorus`` command line: a fast stdlib path for the everyday commands, typer +
rich for everything else (loaded only when needed)."""

from __future__ import annotations

import sys

from chorus._errors import ChorusError, UserError

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, NoReturn

    from typer import Typer

    app: Typer

__all__ = ["app", "main"]

#: Exit status on a closed stdout: 128 + SIGPIPE, as the shell reports a piped tool.
_EXIT_PIPE = 141


def main() -> None:
    """Console-script entry point: maps Chorus errors to a message and an exit code.

    A command of the fast path ends the process at once once its output is flushed
    (``os._exit``): the interpreter's own teardown (every module's, and the flush
    already done) would cost it milliseconds and change nothing it wrote."""
    try:
        code = _fast_or_none(sys.argv[1:])
        if code is None:
            _typer_main()
            return
        _flush()
    except UserError as exc:
        _error(str(exc), exc.exit_code)
    except ChorusError as exc:
        _error(str(exc), 1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        _quiet_on_closed_pipe()
    _exit_now(code)


def _flush() -> None:
    """Everything written so far out of Python's buffers (a closed pipe raises here)."""
    sys.stdout.flush()
    sys.stderr.flush()


def _exit_now(code: int) -> NoReturn:
    import os

    os._exit(code)


def _fast_or_none(argv: list[str]) -> int | None:
    from chorus.cli._fast import run

    return run(argv)


def _typer_main() -> None:
    from chorus.cli._app import run_app

    run_app()


def _quiet_on_closed_pipe() -> NoReturn:
    """The reader of stdout went away (``chorus jobs | head -1``): end quietly, as a
    shell tool does, with Python's own flush at exit sent to /dev/null."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(_EXIT_PIPE)


def _error(message: str, code: int) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


def __getattr__(name: str) -> Any:
    if name == "app":
        from chorus.cli._app import _register, app

        _register()
        return app
    raise AttributeError(f"module 'chorus.cli' has no attribute {name!r}")
