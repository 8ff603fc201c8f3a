"""The compiled code of the methods ``@dataclass`` writes, kept between runs.

``dataclasses`` writes each method it adds to a class (``__init__``, ``__repr__``,
``__eq__``, a frozen class's ``__setattr__`` and ``__delattr__``, ``__hash__``) as
source text and compiles it with ``exec``: on Python 3.11 about 0.4 ms a class, or
90 ms of the daemon's start for the 216 classes it loads, a quarter of its imports.
The text written for a class is the same from run to run, so its compiled code is
kept the way a module's ``.pyc`` is: in ``chorus/__pycache__``, one entry per text,
found by a hash of the text in a file named for the interpreter's cache tag. A text
not found there is compiled as before, so a stale file never changes a class: at
worst it saves nothing.

:func:`install` gives ``dataclasses`` this ``exec`` (a module's globals come before
the builtins), so that nothing of its own is copied here; :func:`save` writes what
was compiled, unless Python is told not to write byte code (then ``./run`` does it
itself: ``python -m chorus._classcode chorus.daemon._server``). Trust: the file holds
code this process runs, as the ``.pyc`` files beside it do; one that another user
could have written is not read.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from hashlib import blake2b
from pathlib import Path

#: ``typing`` is not imported at run time.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any


def _cache_path() -> Path:
    """Where the byte code of a module ``chorus/_dataclass_code.py`` would be (in
    ``__pycache__``, or under ``PYTHONPYCACHEPREFIX``), named ``.bin``."""
    from importlib.util import cache_from_source

    return Path(cache_from_source(str(Path(__file__).with_name("_dataclass_code.py")))).with_suffix(
        ".bin"
    )


#: The file, where the package's byte code is.
CACHE = _cache_path()

_builtin_exec = builtins.exec
_known: dict[bytes, bytes] = {}  # the text's hash -> its marshalled code
_new: dict[bytes, bytes] = {}


def install(path: Path = CACHE) -> None:
    """Make ``dataclasses`` compile through the kept code, read from ``path``."""
    import dataclasses

    _known.update(_read(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]


def _read(path: Path) -> dict[bytes, bytes]:
    """The kept entries; none from a missing, unreadable, foreign or garbled file."""
    try:
        with path.open("rb") as f:
            if not _trusted(os.fstat(f.fileno())):
                return {}
            found = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}


def _trusted(stat: os.stat_result) -> bool:
    """Owned by this user (or root) and written by no one else."""
    return stat.st_uid in (os.getuid(), 0) and not stat.st_mode & 0o022


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec``, with a text's code taken from the kept entries when there."""
    if type(source) is str:
        source = _code(source)
    _builtin_exec(source, globals, locals)


def _code(text: str) -> Any:
    """The code of ``text``: kept, or compiled (and noted, to be kept). Compiled as
    ``dataclasses``' own ``exec`` would: no ``__future__`` flags of this module."""
    key = blake2b(text.encode(), digest_size=16).digest()
    blob = _known.get(key)
    if blob is not None:
        try:
            return marshal.loads(blob)
        except (EOFError, ValueError, TypeError):
            pass
    code = compile(text, "<string>", "exec", dont_inherit=True)
    _new[key] = _known[key] = marshal.dumps(code)
    return code


def save(path: Path = CACHE, *, force: bool = False) -> bool:
    """Write the entries if any is new; not when byte code is not to be written
    (unless ``force``), nor where this user cannot write. True if written."""
    if not _new or (sys.dont_write_bytecode and not force):
        return False
    part = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(marshal.dumps(_read(path) | _known))  # and what others kept since
        os.chmod(part, 0o644)
        part.replace(path)  # whole, or not at all
    except OSError:
        part.unlink(missing_ok=True)  # no half-written file left beside the byte code
        return False
    _new.clear()
    return True


def stats() -> dict[str, int]:
    """How many texts are kept, and how many of them this process compiled."""
    return {"kept": len(_known), "compiled": len(_new)}


def main(argv: list[str]) -> int:
    """``python -m chorus._classcode MODULE...``: keep the code of every class these
    modules make as they load (``./run`` names the daemon's, beside ``compileall``)."""
    import importlib

    install()
    for name in argv:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # the others' classes are kept all the same
            print(f"not kept: {name}: {exc}", file=sys.stderr)
    if not save(force=True) and CACHE.exists():
        CACHE.touch()  # up to date: newer than the sources, as ./run checks
    print(f"{CACHE}: {stats()['kept']} methods")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
