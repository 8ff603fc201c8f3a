"""The macOS sandbox (``sandbox-exec``) profile for one body, from the same
:class:`Layout` as bubblewrap. Pure: it is given the paths and returns the profile
text (SBPL) and the wrapper's argv.

The profile mirrors bubblewrap's mount order, because in SBPL a later rule wins over
an earlier one that matches the same operation:

1. everything allowed (the network too: the CLI must reach its model API), then every
   file write denied;
2. writes allowed again in the writable roots (allowed paths, the CLI's state
   folders, what a worktree's commit writes of its main repository), the body's
   private temporary folder (made by the wrapper at each start, in the shared one,
   and passed as the profile's parameter ``CHORUS_TMP``; ``TMPDIR`` points at it)
   and the few device files a shell writes to;
3. ``CHORUS_HOME`` denied for reading and writing, then what a body needs of it
   allowed back; every denied path that exists denied for reading and writing;
   the CLIs' generated rules, memory and workspace, the CLI's settings file and a
   worktree's pointers denied for writing;
4. the denied programs' real copies may not be executed (their stubs, first on
   ``PATH``, say why).

Not run on macOS by this project's CI (Linux only): see the README.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from chorus.sandbox._bwrap import Layout
from chorus.sandbox._stubs import NOT_FOUND_VAR, not_found_function

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
#: The profile's parameter naming the body's private temporary folder.
TMP_PARAM = "CHORUS_TMP"
#: Device files any shell writes to, outside the writable roots.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/stdout", "/dev/stderr", "/dev/dtracehelper")


def profile(layout: Layout) -> str:
    """The SBPL text of ``layout``'s sandbox."""
    rules = ["(version 1)", "(allow default)", "(deny file-write*)"]
    rules += _rule("allow file-write*", _writable(layout))
    rules += _rule("deny file-read* file-write*", [_subpath(layout.chorus_home)])
    rules += _rule("allow file-read* file-write*", [_subpath(p) for p in layout.shared])
    rules += _rule("deny file-read* file-write*", _hidden(layout))
    rules += _rule("deny file-write*", [_subpath(p) for p in layout.read_only])
    rules += _rule("deny process-exec", [_literal(t) for _, t in layout.stub_targets])
    return "\n".join(rules) + "\n"


def _writable(layout: Layout) -> list[str]:
    tmp = [f"(subpath (param {_string(TMP_PARAM)}))"] if layout.tmp is not None else []
    return [*(_subpath(p) for p in layout.writable), *tmp, '(subpath "/dev/fd")'] + [
        _literal(Path(d)) for d in _DEVICES
    ]


def _hidden(layout: Layout) -> list[str]:
    return [*(_subpath(p) for p in layout.hidden_dirs), *(_literal(p) for p in layout.hidden_files)]


def _rule(action: str, filters: Sequence[str]) -> list[str]:
    """One rule over ``filters`` (none: no rule, since a bare action matches all)."""
    if not filters:
        return []
    return [f"({action}\n  " + "\n  ".join(filters) + ")"]


def _subpath(path: Path) -> str:
    return f"(subpath {_string(str(path))})"


def _literal(path: Path) -> str:
    return f"(literal {_string(str(path))})"


def _string(text: str) -> str:
    """An SBPL string literal (a Scheme string: backslash and quote escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Expanded(str):
    """An argument the wrapper's shell expands (written in double quotes)."""

    __slots__ = ()


def tmp_lines(layout: Layout) -> list[str]:
    """The wrapper's first lines: a fresh private temporary folder in the shared one
    (``mktemp -d``, mode 0700), exported as ``TMPDIR``."""
    if layout.tmp is None:
        return []
    template = shlex.quote(str(layout.tmp / "chorus-body.XXXXXXXX"))
    return [f"TMPDIR=$(/usr/bin/mktemp -d {template}) || exit 1", "export TMPDIR"]


def seatbelt_argv(profile_file: Path, layout: Layout, command: Sequence[str]) -> list[str]:
    """``sandbox-exec [-D CHORUS_TMP=$TMPDIR] -f PROFILE env PATH=stubs:... COMMAND``
    (``sandbox-exec`` sets no environment, so the stubs' ``PATH`` and bash's
    not-found handler go through ``env``; ``TMPDIR`` is exported by the wrapper)."""
    tmp = ["-D", Expanded(f"{TMP_PARAM}=$TMPDIR")] if layout.tmp is not None else []
    return [SANDBOX_EXEC, *tmp, "-f", str(profile_file), *_env(layout), *command]


def _env(layout: Layout) -> list[str]:
    if layout.stub_dir is None or not layout.stub_names:
        return []
    out = ["/usr/bin/env"]
    if layout.path_env is not None:
        out.append(f"PATH={layout.stub_dir}:{layout.path_env}")
    return [*out, f"{NOT_FOUND_VAR}={not_found_function(layout.stub_names)}"]
