"""The identity file and the cached system spec under ``CHORUS_HOME/workspace/``.

``SOUL.md`` is written with a default on first use and is the person's to edit.
``system.json`` (tools on PATH, language versions, CPUs, memory, disk) is
refreshed when older than :data:`SPEC_MAX_AGE_S`; probing runs each version
command with a short timeout, so a slow or broken tool cannot stall a body's
start for long, and only once a day.

The workspace is where routine jobs run, so a body may have written in it: both
files are read without following a link (a link is refused, and the context says
so), written without following one (a new file, or a temporary file renamed into
place), and only known tools and one-line versions of known languages are shown
from the cached spec.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from chorus.config import chorus_home
from chorus.memory import quoted_lines, read_regular

SPEC_MAX_AGE_S = 24 * 3600.0
TOOLS = (
    "git", "gh", "uv", "pip", "npm", "pnpm", "yarn", "make", "cmake", "docker", "podman",
    "kubectl", "terraform", "psql", "sqlite3", "rg", "fd", "jq", "curl", "gcc", "clang",
)  # fmt: skip
LANGUAGES = {
    "python3": ["python3", "--version"],
    "node": ["node", "--version"],
    "go": ["go", "version"],
    "rustc": ["rustc", "--version"],
    "java": ["java", "-version"],
    "ruby": ["ruby", "--version"],
    "bun": ["bun", "--version"],
    "deno": ["deno", "--version"],
}

DEFAULT_SOUL = """\
You are working through Chorus, which starts you on behalf of one person and
keeps what you learn for the next session.

- Remember what matters: when the person states a lasting preference, decision
  or fact, save it with the `memory_write` tool (Chorus's MCP server).
- Before asking the person something they may have told you already, use
  `memory_search`.
- Be direct and brief; say what you changed and what is left.

(This is CHORUS_HOME/workspace/SOUL.md: edit it to change who every body is.)
"""


def workspace_dir() -> Path:
    path = chorus_home() / "workspace"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


MAX_SOUL_BYTES = 64 * 1024


def soul() -> tuple[Path, str]:
    """``SOUL.md`` and its text; written with :data:`DEFAULT_SOUL` on first use."""
    path, text, _ = load_soul()
    return path, text


def load_soul() -> tuple[Path, str, list[str]]:
    """``SOUL.md``, its text and what was refused: a link there (or anything but a
    regular file) is not read; its text is then a visible ``[chorus: ...]`` line."""
    path = workspace_dir() / "SOUL.md"
    _create(path, DEFAULT_SOUL)
    try:
        data = read_regular(path, MAX_SOUL_BYTES)
    except OSError as exc:
        note = f"{path} not read: {exc.strerror}"
        return path, f"[chorus: {note}]", [note]
    return path, data.decode("utf-8", errors="replace").strip(), []


def _create(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` if nothing (not even a dangling link) is there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def system_spec(*, now: float | None = None, max_age_s: float = SPEC_MAX_AGE_S) -> dict[str, Any]:
    """The cached spec; probed when missing or unreadable. One that is too old is
    returned as it is while a thread probes it again for the next caller (a session's
    start does not wait for a daily refresh)."""
    now = time.time() if now is None else now
    path = workspace_dir() / "system.json"
    spec = _cached(path, now, max_age_s)
    if spec is not None:
        return spec
    stale = _cached(path, now, float("inf"))
    if stale is not None:
        threading.Thread(target=_probe_once, args=(path, now, max_age_s), daemon=True).start()
        return stale
    return _probe_once(path, now, max_age_s)


#: One probe at a time in a process: a job that needs the spec while the daemon's
#: warm-up probes it waits for that probe instead of running every command again.
_PROBING = threading.Lock()


def _probe_once(path: Path, now: float, max_age_s: float) -> dict[str, Any]:
    with _PROBING:  # a caller that finds a probe under way waits for its result
        spec = _cached(path, now, max_age_s)
        if spec is None:
            spec = probe_system(now)
            _replace(path, json.dumps(spec, indent=1))
    return spec


def _cached(path: Path, now: float, max_age_s: float) -> dict[str, Any] | None:
    """The spec at ``path`` if it is readable and younger than ``max_age_s``."""
    try:
        spec: dict[str, Any] = json.loads(read_regular(path, 1 << 20))
        if now - float(spec.get("generated_at", 0)) < max_age_s:
            return spec
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return None


def _replace(path: Path, text: str) -> None:
    """Write ``path`` through a new temporary file renamed over it (a link at
    ``path`` is replaced, never followed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def probe_system(now: float) -> dict[str, Any]:
    """The facts, the languages' ``--version`` runs at once (each waits on a process:
    one after the other they took 0.6 s here, through version managers' shims)."""
    with ThreadPoolExecutor(max_workers=len(LANGUAGES)) as pool:
        versions = dict(zip(LANGUAGES, pool.map(_version, LANGUAGES.values()), strict=True))
    return {
        "generated_at": now,
        "tools": [t for t in TOOLS if shutil.which(t)],
        "languages": {name: v for name, v in versions.items() if v},
        "cpus": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "disk_free_gb": round(shutil.disk_usage(Path.home()).free / 2**30, 1),
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
    }


def _version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = (done.stdout or done.stderr).strip().splitlines()
    return out[0][:80] if out else None


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def render_spec(spec: dict[str, Any]) -> str:
    """The spec as the context shows it: only known tools and languages, versions on
    one line, numbers as numbers (the cached file may have been written by a body)."""
    found = _languages(spec.get("languages"))
    langs = ", ".join(v if k in v.casefold() else f"{k} {v}" for k, v in found) or "none found"
    listed = spec.get("tools")
    tools = ", ".join(t for t in TOOLS if isinstance(listed, list) and t in listed)
    return (
        f"Languages: {langs}\nTools on PATH: {tools or 'none found'}\n"
        f"Resources: {_number(spec.get('cpus'))} CPUs, {_number(spec.get('memory_gb'))} GB RAM, "
        f"{_number(spec.get('disk_free_gb'))} GB free disk"
    )


def _languages(found: Any) -> list[tuple[str, str]]:
    if not isinstance(found, dict):
        return []
    out = []
    for name in LANGUAGES:
        version = found.get(name)
        if isinstance(version, str) and version.strip():
            out.append((name, " ".join(quoted_lines(version))[:80]))
    return out


def _number(value: Any) -> str:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else "?"
