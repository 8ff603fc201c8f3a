"""Denied programs replaced, inside the sandbox, by a stub that says why.

A body whose CLI runs shell commands without asking Chorus (Codex in plan mode,
``codex exec``, any body in ``bypassPermissions``) would otherwise get ``sudo``'s
own answer, or none. In the sandbox every program named by a one-word rule of
``[shell] denied_commands`` is shadowed: each copy that exists on the body's
``PATH`` (or the system folders) is covered by the stub, and the stubs' folder
comes first on ``PATH``, so the command fails with a message naming the policy.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from chorus.policy import Policy, denial_text

_SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_GLOBS = frozenset("*?[ ")


def denied_programs(policy: Policy) -> tuple[str, ...]:
    """Programs that a one-word ``denied_commands`` rule names (``sudo``, ``shutdown``)."""
    rules = policy.shell.denied_commands if policy.shell.mode != "unrestricted" else []
    return tuple(sorted({r for r in rules if r and not _GLOBS.intersection(r) and "/" not in r}))


def stub_targets(names: Iterable[str], env: Mapping[str, str]) -> tuple[tuple[str, Path], ...]:
    """``(name, path)`` of every existing copy of each denied program, symlinks followed.
    A link to another program (``halt`` -> ``systemctl``) is left to the ``PATH`` stub,
    so the program it points to is not shadowed too. Remembered while no folder
    searched changed (a program added, removed or replaced changes its folder)."""
    folders = tuple(
        dict.fromkeys(f for f in (*env.get("PATH", "").split(os.pathsep), *_SYSTEM_BIN) if f)
    )
    key, stamps = (tuple(names), folders), _stamps(folders)
    known = _FOUND.get(key)
    if known is not None and known[0] == stamps and all(p.is_file() for _, p in known[1]):
        return known[1]
    found = _find(key[0], folders)
    if len(_FOUND) >= _KEPT:
        _FOUND.clear()
    _FOUND[key] = (stamps, found)
    return found


_Targets = tuple[tuple[str, Path], ...]
#: (names, folders) -> (the folders' modification times, the targets found then).
_FOUND: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[int, ...], _Targets]] = {}
_KEPT = 64


def _stamps(folders: Iterable[str]) -> tuple[int, ...]:
    """Each folder's modification time (-1: none there)."""
    out = []
    for folder in folders:
        try:
            out.append(os.stat(folder).st_mtime_ns)
        except OSError:
            out.append(-1)
    return tuple(out)


def _find(names: Iterable[str], folders: Iterable[str]) -> _Targets:
    found: dict[Path, str] = {}
    for name in names:
        for folder in folders:
            real = (Path(folder) / name).resolve()
            if real.name == name and real.is_file():
                found.setdefault(real, name)
    return tuple((name, path) for path, name in found.items())


def refusal(name: str) -> str:
    """What running the denied program ``name`` prints: the policy's one wording."""
    why = f"`{name}` is a denied command (policy.toml [shell] denied_commands); it cannot run"
    return denial_text("shell.denied_command", f"{why} in this sandbox", "shell")


def stub_text(name: str) -> str:
    return f"#!/bin/sh\necho {shlex.quote(refusal(name))} >&2\nexit 126\n"


def write_stubs(folder: Path, names: Iterable[str]) -> None:
    """One executable stub per name in ``folder`` (rewritten only when it differs)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in names:
        path = folder / name
        text = stub_text(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        os.chmod(path, stat.S_IRWXU)


#: bash calls this function for a program it cannot find; exported through the
#: environment it survives login shells that reset ``PATH`` (``bash -lc``, as Codex
#: runs commands), so a denied program that is not installed still says why.
NOT_FOUND_VAR = "BASH_FUNC_command_not_found_handle%%"


def not_found_function(names: Iterable[str]) -> str:
    """The body of bash's ``command_not_found_handle`` for the denied ``names``."""
    cases = "".join(
        f"{shlex.quote(name)}) echo {shlex.quote(refusal(name))} >&2; return 126;; "
        for name in names
    )
    return f'() {{ case "$1" in {cases}esac; echo "bash: $1: command not found" >&2; return 127; }}'
