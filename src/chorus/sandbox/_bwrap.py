"""The bubblewrap command line for one body, built from ``policy.toml``. Pure: it is
given the paths and what exists, and returns argv.

Layout, in mount order (a later mount shadows an earlier one):

1. the whole file system read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc``;
2. a private temporary folder over the shared one (an empty tmpfs on ``/tmp``, gone
   with the body; ``TMPDIR`` points at a folder in it, see :data:`TMPDIR_NAME`), then
   back in, read-only, what of the shared one the body needs to see (its home, its
   folder, its main repository, when they live there);
3. writable: the policy's allowed roots, the folders the CLI keeps its state in,
   and what a commit in a git worktree writes of its main repository;
4. hidden: ``CHORUS_HOME`` (an empty tmpfs), then back in only what a body needs
   (its MCP link to Chorus, the memory and workspace folders); every denied path
   that exists (folders become an empty tmpfs, files ``/dev/null``), and ``**``
   patterns expanded under the roots;
5. read-only again, inside what is writable or shared: the CLIs' generated rules,
   the memory and workspace folders, the CLI's settings file, the main
   repository's pointers of a worktree.

The network is kept: the CLI must reach its model API.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chorus.sandbox._stubs import NOT_FOUND_VAR, not_found_function

#: The body's ``TMPDIR``: a folder in its private ``/tmp``, not ``/tmp`` itself. Codex
#: makes the links it runs its own sandbox's helper through (``codex-linux-sandbox``,
#: ``apply_patch``) in ``$CODEX_HOME/tmp``, but refuses to when ``CODEX_HOME`` lies
#: under ``TMPDIR``; its bubblewrap then runs the helper by bare name, which no PATH
#: holds, and every command Codex sandboxes fails with "bwrap: execvp
#: codex-linux-sandbox". With ``TMPDIR`` at ``/tmp`` that was any ``CODEX_HOME`` under
#: ``/tmp`` (a test's home, a scratch one).
TMPDIR_NAME = "chorus-tmp"


@dataclass(frozen=True, slots=True)
class Layout:
    """What the sandbox of one body is made of (absolute, resolved paths)."""

    writable: tuple[Path, ...]
    hidden_dirs: tuple[Path, ...]
    hidden_files: tuple[Path, ...]
    chorus_home: Path
    #: Under ``chorus_home``: what the body may still reach (bound back, writable).
    shared: tuple[Path, ...] = ()
    cwd: Path | None = None
    extra: tuple[str, ...] = field(default_factory=tuple)
    #: Denied programs shadowed by stubs that say why (see ``_stubs``): the stubs'
    #: folder, the programs' names, every existing copy, and the PATH to set.
    stub_dir: Path | None = None
    stub_names: tuple[str, ...] = ()
    stub_targets: tuple[tuple[str, Path], ...] = ()
    path_env: str | None = None
    #: Inside the writable or shared ones: read-only for the body (the CLIs' generated
    #: rules, memory and workspace, the CLI's settings file, a worktree's pointers).
    read_only: tuple[Path, ...] = ()
    #: The shared temporary folder, replaced by a private one (None: kept as it is).
    tmp: Path | None = None
    #: Inside ``tmp``: what stays visible there, read-only.
    visible: tuple[Path, ...] = ()


def argv(bwrap: str, layout: Layout, command: Sequence[str]) -> list[str]:
    """``bwrap ... -- command``."""
    # A PID namespace of its own: a body sees no other process in /proc (another
    # body's command line and environment carry its session's channel URL), and
    # whatever it starts ends with it, even in a session of its own (``setsid``).
    out = [bwrap, "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    out += _private_tmp(layout, command)
    out += _binds("--bind", layout.writable)
    out += ["--tmpfs", str(layout.chorus_home)]
    out += _binds("--bind", layout.shared)
    for folder in layout.hidden_dirs:
        out += ["--tmpfs", str(folder)]
    for file in layout.hidden_files:
        out += ["--ro-bind", "/dev/null", str(file)]
    out += _binds("--ro-bind", layout.read_only)
    out += _stubs(layout)
    if layout.cwd is not None:
        out += ["--chdir", str(layout.cwd)]
    return [*out, *layout.extra, "--", *command]


def _private_tmp(layout: Layout, command: Sequence[str]) -> list[str]:
    """A fresh tmpfs on ``layout.tmp`` (seen by no other process: its mode does not
    matter) with the body's ``TMPDIR`` in it; then what must stay visible in it, and
    the program itself when it lives there."""
    if layout.tmp is None:
        return []
    tmpdir = str(layout.tmp / TMPDIR_NAME)
    out = ["--tmpfs", str(layout.tmp), "--dir", tmpdir, "--setenv", "TMPDIR", tmpdir]
    program = _program(command)
    inside = [p for p in (*layout.visible, *program) if p.is_relative_to(layout.tmp)]
    return out + _binds("--ro-bind", outermost(inside))


def _program(command: Sequence[str]) -> list[Path]:
    return program_paths(command[0]) if command else []


def program_paths(program: str) -> list[Path]:
    """The program, when named by its absolute path, and what it runs from: the
    outermost ``node_modules`` folder its real file lies in (a Node CLI such as Gemini
    or an ACP adapter loads the files beside it and its dependencies from there), or
    the virtual environment its Python is in. A checkout under ``/tmp`` would
    otherwise leave it only its entry point."""
    if not program.startswith("/"):
        return []
    path = Path(program)
    modules = [p for p in path.resolve().parents if p.name == "node_modules"]
    venv = [path.parent.parent] if (path.parent.parent / "pyvenv.cfg").is_file() else []
    return [path, *modules[-1:], *venv]


def _stubs(layout: Layout) -> list[str]:
    if layout.stub_dir is None or not layout.stub_names:
        return []
    out = ["--ro-bind", str(layout.stub_dir), str(layout.stub_dir)]
    for name, target in layout.stub_targets:
        out += ["--ro-bind", str(layout.stub_dir / name), str(target)]
    if layout.path_env is not None:
        out += ["--setenv", "PATH", f"{layout.stub_dir}:{layout.path_env}"]
    return [*out, "--setenv", NOT_FOUND_VAR, not_found_function(layout.stub_names)]


def _binds(flag: str, paths: Iterable[Path]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += [flag, str(path), str(path)]
    return out


def outermost(paths: Iterable[Path]) -> tuple[Path, ...]:
    """``paths`` without duplicates and without any path inside another one."""
    unique = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == k or path.is_relative_to(k) for k in kept):
            kept.append(path)
    return tuple(kept)
