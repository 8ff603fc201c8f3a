"""The native program behind a CLI's Node launcher, started without Node.

Codex's npm package (``@openai/codex``) installs ``bin/codex.js``, a Node script
that finds the platform's native ``codex`` (``@openai/codex-<platform>``'s
``vendor/<target>/bin/codex``), sets two variables and ``execve``\\ s it: a Node
start (a quarter to half a second here) before every Codex process. A body runs the
native program directly with the same variables, so what runs is what the launcher
would have run.

Anything else (another install, a configured path that is not that launcher, a
missing platform package) is used as it is.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

#: The Node launcher's file in Codex's npm package (``<package>/bin/codex.js``).
_LAUNCHER = ("@openai", "codex", "bin", "codex.js")
#: (``sys.platform``, ``platform.machine()``) → (platform package, target).
_TARGETS = {
    ("linux", "x86_64"): ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "aarch64"): ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x86_64"): ("codex-darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("codex-darwin-arm64", "aarch64-apple-darwin"),
}


@dataclass(frozen=True, slots=True)
class NativeCli:
    """The program to run and the variables its launcher would have set."""

    path: Path
    env: dict[str, str] = field(default_factory=dict)


def native_cli(executable: Path) -> NativeCli:
    """The native program ``executable`` launches, or ``executable`` itself."""
    try:
        real = executable.resolve()
        stat = real.stat()
    except OSError:
        return NativeCli(executable)
    found = _native(str(real), stat.st_ino, stat.st_mtime_ns)
    return found if found is not None else NativeCli(executable)


@lru_cache(maxsize=16)
def _native(launcher: str, inode: int, mtime_ns: int) -> NativeCli | None:
    """Cached per launcher file (path, inode and modification time)."""
    path = Path(launcher)
    if path.parts[-len(_LAUNCHER) :] != _LAUNCHER:
        return None
    root = path.parent.parent  # .../@openai/codex
    for vendor in _vendor_dirs(root):
        program = _entrypoint(vendor)
        if program is not None:
            return NativeCli(program, _launcher_env(root))
    return None


def _vendor_dirs(root: Path) -> list[Path]:
    """Where Node's resolution would find the platform package: nested, then beside."""
    target = _TARGETS.get((sys.platform, platform.machine()))
    if target is None:
        return []
    package, triple = target
    places = (root / "node_modules" / "@openai", root.parent)
    return [place / package / "vendor" / triple for place in places]


def _entrypoint(vendor: Path) -> Path | None:
    """The vendor folder's program, as its ``codex-package.json`` names it."""
    try:
        manifest = json.loads((vendor / "codex-package.json").read_text())
        program = vendor / str(manifest.get("entrypoint", "bin/codex"))
    except (OSError, ValueError, AttributeError):
        program = vendor / "bin" / "codex"
    return program if program.is_file() else None


def _launcher_env(root: Path) -> dict[str, str]:
    return {"CODEX_MANAGED_PACKAGE_ROOT": str(root), "CODEX_MANAGED_BY_NPM": "1"}
