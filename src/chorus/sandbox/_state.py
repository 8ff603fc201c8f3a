"""Where each agent CLI keeps its state: the only part of a body's home its sandbox
lets it write (the rest of the home is read-only, so a body cannot plant a line in
``~/.bashrc``, ``~/.profile``, ``~/.gitconfig``, ``~/.local/bin`` or a systemd unit).

How the list was observed: each pinned CLI (claude-code 2.1.330, codex 0.169.0,
gemini-cli 0.61.0, and the ACP adapters claude-code-acp 0.16.2 and codex-acp 0.16.0)
ran two jobs of one session through the daemon, as every body (``claude``,
``claude-print``, ``codex``, ``codex-exec``, ``gemini``, ``gemini-headless``,
``claude-code-acp``, ``codex-acp``), against the scripted model server with the
sandbox off and a fresh home, under ``strace -f`` (opens for writing, ``mkdir``,
``rename``, ``unlink``, ``symlink``, ``utimensat``). Outside the work folder each
wrote only:

- Claude Code (and claude-code-acp): ``~/.claude/`` (projects, sessions,
  session-env, shell-snapshots, plugins/store, backups, todos, plans, debug);
  ``~/.cache/claude-cli-nodejs/`` (its MCP servers' logs); ``~/.claude.json``
  (``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set); ``$TMPDIR``. Claude Code
  saves ``~/.claude.json`` through a temporary file and a lock folder beside it in
  the home, which stays read-only: it runs on without saving it. The Claude Code
  inside claude-code-acp falls back to writing the file in place, and stops at
  start when it cannot: the file is bound writable (made, ``{}``, when missing).
  claude-code-acp also ran ``npm``, which writes ``~/.npm/_logs`` (left read-only:
  npm only warns, and ``~/.npm`` holds ``npx``'s packages, run later unsandboxed).
- Codex (and codex-acp): ``$CODEX_HOME`` (default ``~/.codex/``: its sqlite
  databases, sessions, shell_snapshots, skills/.system, tmp/arg0,
  thread-writer-locks, installation_id); ``$TMPDIR``.
- Gemini CLI: ``$GEMINI_CLI_HOME/.gemini/`` (default ``~/.gemini/``: projects.json
  with its lock folder and temporary files, tmp/<project>/chats and logs, history);
  ``$TMPDIR``.

``$TMPDIR`` is the body's private temporary folder. Inside those folders the CLI's
own settings file stays read-only (made, empty, when missing, so that there is a
file to bind): it names programs the person's own runs of the CLI start (hooks, MCP
servers, ``notify``), which a body must not plant.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Place:
    """``$var/sub`` when ``var`` is set in the body's environment, else
    ``HOME/default/sub``."""

    var: str
    default: str
    sub: str = ""

    def path(self, env: Mapping[str, str], home: Path) -> Path:
        base = env.get(self.var)
        folder = Path(base) if base else home / self.default
        return folder / self.sub if self.sub else folder


@dataclass(frozen=True, slots=True)
class Entry:
    """One folder (``made`` None) or file (made with the text ``made`` when missing)
    of a CLI's state; ``writable`` False: its settings, read-only inside the rest."""

    place: Place
    made: str | None = None
    writable: bool = True


_CLAUDE = (
    Entry(Place("CLAUDE_CONFIG_DIR", ".claude")),
    Entry(Place("XDG_CACHE_HOME", ".cache", "claude-cli-nodejs")),
    Entry(Place("CLAUDE_CONFIG_DIR", "", ".claude.json"), made="{}\n"),
    Entry(Place("CLAUDE_CONFIG_DIR", ".claude", "settings.json"), made="{}\n", writable=False),
)
_CODEX = (
    Entry(Place("CODEX_HOME", ".codex")),
    Entry(Place("CODEX_HOME", ".codex", "config.toml"), made="", writable=False),
)
_GEMINI = (
    Entry(Place("GEMINI_CLI_HOME", "", ".gemini")),
    Entry(Place("GEMINI_CLI_HOME", "", ".gemini/settings.json"), made="{}\n", writable=False),
)
#: By the name the daemon's config knows the CLI under (``[agents.NAME]``); the ACP
#: adapters run Claude Code and Codex, and keep their state where those do.
STATE: Mapping[str, tuple[Entry, ...]] = {
    "claude": _CLAUDE,
    "claude-code-acp": _CLAUDE,
    "codex": _CODEX,
    "codex-acp": _CODEX,
    "gemini": _GEMINI,
}


def state_cli(name: str, executable: Path | None) -> str:
    """The CLI whose state a body keeps: its own name when known here, else the known
    CLI its executable is (an ACP agent of the config that runs ``claude-code-acp``,
    say, keeps Claude Code's state); else ``name``."""
    if name in STATE or executable is None:
        return name
    where = f"{executable} {executable.resolve()}"
    return next((cli for cli in _BY_LENGTH if cli in where), name)


#: Known CLIs, longest name first (``claude-code-acp`` before ``claude``).
_BY_LENGTH = sorted(STATE, key=len, reverse=True)


@dataclass(frozen=True, slots=True)
class StatePaths:
    """Where one body's CLI keeps its state, made if missing (absolute, resolved)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


def state_paths(cli: str | None, env: Mapping[str, str], home: Path) -> StatePaths:
    """The state of ``cli`` for a body with environment ``env`` and home ``home``,
    made now so that the sandbox has something to bind (a CLI this module does not
    know, such as an ACP agent of the config: none)."""
    found = [(e, _made(e, e.place.path(env, home))) for e in STATE.get(cli or "", ())]
    writable = tuple(p for e, p in found if p is not None and e.writable)
    return StatePaths(writable, tuple(p for e, p in found if p is not None and not e.writable))


def _made(entry: Entry, path: Path) -> Path | None:
    return _folder(path) if entry.made is None else _file(path, entry.made)


def _folder(path: Path) -> Path | None:
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path.resolve()
    return None  # not ours to make (a home elsewhere): the CLI says so itself


def _file(path: Path, text: str) -> Path | None:
    with contextlib.suppress(OSError):  # there already (or not ours to make)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
    with contextlib.suppress(OSError):
        return path.resolve(strict=True)
    return None
