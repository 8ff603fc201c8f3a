"""Where a body's sandbox comes from: the policy's paths for its folder, the CLI's
state folders under the home of its environment, and what exists on disk now;
written as a small wrapper script that the body runs instead of its CLI (so every
body, one-shot or long-lived, warm or resumed, starts inside it without knowing)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from chorus._errors import ConfigError
from chorus.policy import PathContext, Policy, native_dir
from chorus.sandbox._bwrap import Layout, argv, outermost, program_paths
from chorus.sandbox._git import git_paths
from chorus.sandbox._seatbelt import SANDBOX_EXEC, Expanded, profile, seatbelt_argv, tmp_lines
from chorus.sandbox._state import state_paths
from chorus.sandbox._stubs import denied_programs, stub_targets, write_stubs
from chorus.sandbox._walk import is_tree_pattern, tree_matches

Mode = Literal["auto", "enforce", "off"]

#: Under CHORUS_HOME, what a body may still see: the memory and workspace folders
#: (never the daemon's socket: Chorus's tools reach a body over its session's channel).
SHARED = ("memory", "workspace")
#: Of those, what a body may only read: it changes memory through Chorus's tools,
#: never SOUL.md, HEARTBEAT.md or a routine's file itself.
READ_ONLY_SHARED = ("memory", "workspace")
#: The shared temporary folder that every body gets a private one in place of.
SHARED_TMP = Path("/tmp")
#: Under CHORUS_HOME: the stubs that stand in for denied programs in every sandbox.
STUBS = "run/sandbox/stubs"
#: Secrets in a home folder that no body sees, whatever the policy lists.
_HOME_SECRETS = (".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".netrc")
#: Most files a ``**`` pattern may expand to before the rest is left to the parser.
_MAX_MATCHES = 500


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None (not Linux, or not installed)."""
    return shutil.which("bwrap") if sys.platform.startswith("linux") else None


def seatbelt_path() -> str | None:
    """macOS's ``sandbox-exec``, or None (not macOS, or not there)."""
    found = sys.platform == "darwin" and os.access(SANDBOX_EXEC, os.X_OK)
    return SANDBOX_EXEC if found else None


def tool_path() -> str | None:
    """The sandbox tool of this platform: bubblewrap on Linux, ``sandbox-exec`` on
    macOS; None where there is none."""
    return bwrap_path() or seatbelt_path()


def active(mode: Mode) -> bool:
    """Whether bodies start sandboxed; ``enforce`` without a sandbox tool is an error."""
    if mode == "off":
        return False
    if tool_path() is not None:
        return True
    if mode == "enforce":
        raise ConfigError(_unavailable(sys.platform))
    return False


def _unavailable(platform: str) -> str:
    """Why ``enforce`` cannot hold here, and what to do."""
    off = "set [sandbox] mode = 'off' to run bodies unsandboxed (the policy still applies)"
    if platform.startswith("linux"):
        return f"[sandbox] mode = 'enforce' needs bubblewrap: apt-get install bubblewrap, or {off}"
    if platform == "darwin":
        return f"[sandbox] mode = 'enforce' needs {SANDBOX_EXEC}, which is missing; {off}"
    return (
        "[sandbox] mode = 'enforce' is only available on Linux (bubblewrap) and macOS "
        f"(sandbox-exec); {off}"
    )


def layout(
    policy: Policy,
    cwd: Path,
    env: Mapping[str, str],
    chorus_home: Path,
    *,
    cli: str | None = None,
    launches: Iterable[Sequence[str]] = (),
) -> Layout:
    """The sandbox of a body of ``cli`` (the name of its ``[agents.NAME]``; None or
    a CLI not in ``chorus.sandbox._state``: no state folder) working in ``cwd`` with
    environment ``env``; ``launches``: the commands it is given to start (its stdio
    MCP servers), which must find what they run from."""
    home = Path(env.get("HOME") or Path.home())
    ctx = PathContext(cwd=cwd, home=home, tmp=Path(tempfile.gettempdir()), chorus_home=chorus_home)
    roots = [Path(ctx.expand(p)) for p in policy.filesystem.allowed_paths if "*" not in p]
    git, state = git_paths(cwd), state_paths(cli, env, home)
    writable = outermost([*_existing(roots), *git.writable, *state.writable])
    denied = [ctx.expand(p) for p in policy.filesystem.denied_paths]
    denied += [str(h / name) for h in _homes(home) for name in _HOME_SECRETS]
    dirs, files = _hidden(denied, roots, chorus_home)
    inside = [p for p in _existing(roots) if p.is_relative_to(chorus_home.resolve())]
    shared = _existing([*(chorus_home / s for s in SHARED), *inside])
    kept = _existing(chorus_home / s for s in READ_ONLY_SHARED)
    names = denied_programs(policy)
    ran_from = _run_from(launches)
    return Layout(
        writable,
        dirs,
        files,
        chorus_home.resolve(),
        tuple(shared),
        cwd,
        stub_dir=chorus_home.resolve() / STUBS,
        stub_names=names,
        stub_targets=stub_targets(names, env),
        path_env=env.get("PATH") or os.defpath,
        # native_dir is made now: Gemini's rules are written in it later.
        read_only=(native_dir().resolve(), *kept, *state.read_only, *git.read_only),
        tmp=SHARED_TMP.resolve(),
        visible=tuple(_existing([home, cwd, *git.common, *_path_folders(env), *ran_from])),
    )


def _run_from(launches: Iterable[Sequence[str]]) -> list[Path]:
    """What the commands a body starts run from (each program as a CLI's own, see
    ``program_paths``) and the paths their arguments name, with a script's folder;
    never the shared temporary folder itself, which stays private."""
    out: list[Path] = []
    for command in launches:
        out += program_paths(command[0]) if command else []
        named = [Path(a) for a in command[1:] if a.startswith("/") and Path(a).exists()]
        out += [*named, *(p.parent for p in named if p.is_file())]
    tmp = SHARED_TMP.resolve()
    return [p for p in out if p.resolve() != tmp]


def _homes(home: Path) -> list[Path]:
    """The body's home, and the daemon user's (from its environment and its
    password entry), whose secrets no body sees either."""
    homes = [home]
    with contextlib.suppress(RuntimeError):  # no HOME and no password entry
        homes.append(Path.home())
    with contextlib.suppress(ImportError, KeyError):
        import pwd

        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    return list(dict.fromkeys(homes))


def _path_folders(env: Mapping[str, str]) -> list[Path]:
    return [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")]


def _existing(paths: Iterable[Path]) -> list[Path]:
    return [p.resolve() for p in paths if p.exists()]


def _hidden(
    patterns: list[str], roots: list[Path], chorus_home: Path
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """Existing denied paths, split into folders and files (CHORUS_HOME is hidden
    on its own)."""
    found: set[Path] = set()
    tree = [p for p in patterns if is_tree_pattern(p)]
    for root in roots:  # one walk for all the ``**/NAME`` patterns
        found.update(tree_matches(tree, root, _MAX_MATCHES) if tree else ())
    for pattern in patterns:
        if pattern not in tree:
            found.update(_matches(pattern, roots))
    found.discard(chorus_home.resolve())
    dirs = tuple(sorted(p for p in found if p.is_dir()))
    files = tuple(sorted(p for p in found if p.is_file()))
    return dirs, files


def _matches(pattern: str, roots: list[Path]) -> list[Path]:
    if "*" not in pattern and "?" not in pattern:
        path = Path(pattern)
        return [path.resolve()] if path.exists() else []
    bases = [str(r / pattern) for r in roots] if pattern.startswith("**/") else [pattern]
    out: list[Path] = []
    for base in bases:
        out += [Path(m).resolve() for m in glob.iglob(base, recursive=True)][:_MAX_MATCHES]
    return out


def write_wrapper(path: Path, tool: str, box: Layout, executable: Path) -> Path:
    """A ``sh`` script that runs ``executable`` (with its arguments) inside ``box``
    (and the stubs of the denied programs it shadows), with ``tool`` (bubblewrap, or
    ``sandbox-exec`` and a profile written beside the script)."""
    if box.stub_dir is not None:
        write_stubs(box.stub_dir, box.stub_names)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    first = tmp_lines(box) if Path(tool).name == "sandbox-exec" else []
    line = " ".join(_quote(a) for a in _wrapped(path, tool, box, executable))
    lines = ["#!/bin/sh", *first, f'exec {line} "$@"']
    text = "\n".join(lines) + "\n"
    if not _holds(path, text):  # named by its layout's digest: mostly written already
        path.write_text(text, encoding="utf-8")
    os.chmod(path, stat.S_IRWXU)
    return path


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def _wrapped(path: Path, tool: str, box: Layout, executable: Path) -> list[str]:
    if Path(tool).name != "sandbox-exec":
        return argv(tool, box, [str(executable)])
    sb = path.with_suffix(".sb")
    sb.write_text(profile(box), encoding="utf-8")
    os.chmod(sb, stat.S_IRUSR | stat.S_IWUSR)
    return seatbelt_argv(sb, box, [str(executable)])


def _quote(arg: str) -> str:
    if isinstance(arg, Expanded):
        return f'"{arg}"'
    return "'" + arg.replace("'", "'\\''") + "'"
