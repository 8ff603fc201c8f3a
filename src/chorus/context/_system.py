"""The identity file and the cached system spec under ``CHORUS_HOME/workspace/``.

``SOUL.md`` is written with a default on first use and is the person's to edit.
``system.json`` (tools on PATH, language versions, CPUs, memory, disk) is
refreshed when older than :data:`SPEC_MAX_AGE_S`; probing runs each version
command with a short timeout, so a slow or broken tool cannot stall a body's
start for long, and only once a day.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from chorus.config import chorus_home

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


def soul() -> tuple[Path, str]:
    """``SOUL.md`` and its text; written with :data:`DEFAULT_SOUL` on first use."""
    path = workspace_dir() / "SOUL.md"
    if not path.exists():
        path.write_text(DEFAULT_SOUL, encoding="utf-8")
    return path, path.read_text(encoding="utf-8", errors="replace").strip()


def system_spec(*, now: float | None = None, max_age_s: float = SPEC_MAX_AGE_S) -> dict[str, Any]:
    """The cached spec, probed again when missing, unreadable or too old."""
    now = time.time() if now is None else now
    path = workspace_dir() / "system.json"
    try:
        spec: dict[str, Any] = json.loads(path.read_text())
        if now - float(spec.get("generated_at", 0)) < max_age_s:
            return spec
    except (OSError, ValueError):
        pass
    spec = probe_system(now)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(spec, indent=1))
    os.replace(tmp, path)
    return spec


def probe_system(now: float) -> dict[str, Any]:
    return {
        "generated_at": now,
        "tools": [t for t in TOOLS if shutil.which(t)],
        "languages": {name: v for name, argv in LANGUAGES.items() if (v := _version(argv))},
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
    found = spec.get("languages", {}).items()
    langs = ", ".join(v if k in v.casefold() else f"{k} {v}" for k, v in found) or "none found"
    tools = ", ".join(spec.get("tools", [])) or "none found"
    return (
        f"Languages: {langs}\nTools on PATH: {tools}\n"
        f"Resources: {spec.get('cpus')} CPUs, {spec.get('memory_gb')} GB RAM, "
        f"{spec.get('disk_free_gb')} GB free disk"
    )
