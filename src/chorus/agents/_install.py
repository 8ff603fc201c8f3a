"""Install the pinned agent CLIs with npm into a project-local folder, and find them.

Lookup order for a CLI: the ``command`` in ``config.toml`` ``[agents.<name>]``,
then the project-local folder (``CHORUS_AGENTS_DIR``, default ``.agents/`` at the
project root), then ``PATH``.

Why pins: AGENT_CLIS.md, e.g. an unpinned Claude Code install on Node 20
silently picks 2.1.197, which behaves differently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from chorus._errors import AgentNotFoundError, ChorusError
from chorus.agents._versions import cached_version
from chorus.config import ChorusConfig, load_config


@dataclass(frozen=True, slots=True)
class PinnedAgent:
    name: str
    package: str
    version: str
    #: False for ACP adapters: their ``--version`` starts a server, so the
    #: installed package.json tells the version instead.
    answers_version: bool = True

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


PINNED: tuple[PinnedAgent, ...] = (
    PinnedAgent("claude", "@anthropic-ai/claude-code", "2.1.330"),
    PinnedAgent("codex", "@openai/codex", "0.169.0"),
    PinnedAgent("gemini", "@google/gemini-cli", "0.61.0"),
    # ACP adapters (Zed's) for Claude Code and Codex: ACP bodies beyond Gemini.
    PinnedAgent("claude-code-acp", "@zed-industries/claude-code-acp", "0.16.2", False),
    PinnedAgent("codex-acp", "@zed-industries/codex-acp", "0.16.0", False),
)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    path: Path | None
    version: str | None
    source: str  # "config", "project", "path" or "missing"
    pinned: str | None


def _project_root() -> Path:
    # src/chorus/agents/_install.py -> repo root when installed editable from a clone.
    here = Path(__file__).resolve().parents[3]
    if (here / "pyproject.toml").exists():
        return here
    return Path.cwd()


def agents_dir() -> Path:
    """The project-local folder the pinned CLIs are installed into."""
    raw = os.environ.get("CHORUS_AGENTS_DIR")
    return Path(raw).expanduser().resolve() if raw else _project_root() / ".agents"


def _installed_version(package: str) -> str | None:
    manifest = agents_dir() / "node_modules" / package / "package.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def install_agents(*, force: bool = False) -> list[tuple[PinnedAgent, bool]]:
    """Install every pinned CLI not already present at its pinned version.

    Idempotent: a second call with everything in place runs no npm at all.
    Returns ``(agent, installed_now)`` pairs. Raises :class:`ChorusError` when npm
    is missing or fails, with npm's output tail.
    """
    target = agents_dir()
    target.mkdir(parents=True, exist_ok=True)
    todo = [a for a in PINNED if force or _installed_version(a.package) != a.version]
    if todo:
        npm = shutil.which("npm")
        if npm is None:
            raise ChorusError("npm is not on PATH; install Node.js and npm first")
        cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(target)]
        proc = subprocess.run(
            [*cmd, *(a.spec for a in todo)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout)[-2000:]
            raise ChorusError(f"npm install failed (exit {proc.returncode}):\n{tail}")
    return [(a, a in todo) for a in PINNED]


def _version_of(path: Path) -> str | None:
    """What the CLI answers to ``--version`` (remembered per binary: ``_versions``)."""
    return cached_version(path, _ask_version)


def _ask_version(path: Path) -> str | None:
    try:
        proc = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip().splitlines()
    return out[0] if proc.returncode == 0 and out else None


def _locate(name: str, config: ChorusConfig | None = None) -> tuple[Path | None, str]:
    configured = (config or load_config()).agents.get(name)
    if configured is not None and configured.command:
        found = shutil.which(configured.command)
        return (Path(found) if found else Path(configured.command)), "config"
    local = agents_dir() / "node_modules" / ".bin" / name
    if local.exists():
        return local, "project"
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path), "path"
    return None, "missing"


def find_agent(name: str, config: ChorusConfig | None = None) -> Path:
    """Return the executable for agent ``name`` or raise :class:`AgentNotFoundError`.

    ``config`` defaults to reading ``config.toml`` now; a daemon passes the config
    it started with so that a running daemon is consistent with itself."""
    path, source = _locate(name, config)
    if path is None or not path.exists():
        where = f"configured command {path}" if source == "config" else "config, .agents or PATH"
        raise AgentNotFoundError(
            f"agent CLI {name!r} not found ({where}); run `chorus agents install`"
        )
    return path


def describe_agents(*, with_version: bool = True) -> list[AgentInfo]:
    """One :class:`AgentInfo` per pinned CLI, for ``chorus agents list`` and doctor."""
    infos = []
    for agent in PINNED:
        path, source = _locate(agent.name)
        exists = path is not None and path.exists()
        version = None
        if exists and with_version and path:
            version = (
                _version_of(path) if agent.answers_version else _installed_version(agent.package)
            )
        infos.append(
            AgentInfo(
                name=agent.name,
                path=path if exists else None,
                version=version,
                source=source if exists else "missing",
                pinned=agent.version,
            )
        )
    return infos
