"""Offline environments for the real CLIs: a scratch HOME, config files, minimal env.

The env is built from scratch (PATH, LANG, TERM plus what each CLI needs), never
copied from ``os.environ``, so the developer's real HOME and API keys cannot leak
into a test run.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Cli = Literal["claude", "codex", "gemini"]
CLIS: tuple[Cli, ...] = ("claude", "codex", "gemini")

FAKE_API_KEY = "dummy"
CODEX_KEY_VAR = "FAKE_OPENAI_KEY"
CODEX_MODEL = "gpt-5.5"
GEMINI_MODEL = "gemini-2.5-flash"

CODEX_OFFLINE_FLAGS: tuple[str, ...] = (
    "--disable",
    "plugins",  # else every run tries `git ls-remote` on github.com
    "--disable",
    "unbounded_connection_retries",  # else "server down" retries forever
    "--skip-git-repo-check",
)
"""Flags every offline ``codex exec`` / ``codex app-server`` run needs (AGENT_CLIS.md 2.2)."""


def base_env(home: Path) -> dict[str, str]:
    """The minimal env shared by all CLIs: PATH (kept, for node), LANG, TERM, HOME, TMPDIR.

    TMPDIR points inside ``home`` because Gemini drops full-prompt error reports
    in the temp directory on every API error.
    """
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "HOME": str(home),
        "TMPDIR": str(tmp),
    }


def claude_env(home: Path, base_url: str, *, max_retries: int | None = 0) -> dict[str, str]:
    """Env for Claude Code against ``base_url`` (no config file needed).

    ``max_retries`` sets ``CLAUDE_CODE_MAX_RETRIES`` (0 = fail on the first API
    error, observed to apply to 429/500/529/401); ``None`` keeps the CLI default of 10.
    """
    env = base_env(home)
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=FAKE_API_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        # We run as root in CI; --dangerously-skip-permissions refuses root without it.
        IS_SANDBOX="1",
    )
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    return env


def codex_config(
    base_url: str,
    *,
    model: str = CODEX_MODEL,
    request_max_retries: int | None = 0,
    stream_max_retries: int | None = 0,
) -> str:
    """``config.toml`` text with a custom ``fake`` provider at ``base_url`` (server root).

    Retry settings of ``None`` are omitted (Codex defaults: 5 retries, slow).
    """
    lines = [
        f"model = {json.dumps(model)}",
        'model_provider = "fake"',
        "",
        "[model_providers.fake]",
        'name = "Chorus fake model server"',
        f"base_url = {json.dumps(base_url.rstrip('/') + '/v1')}",  # codex appends /responses
        f"env_key = {json.dumps(CODEX_KEY_VAR)}",
        'wire_api = "responses"',
    ]
    if request_max_retries is not None:
        lines.append(f"request_max_retries = {request_max_retries}")
    if stream_max_retries is not None:
        lines.append(f"stream_max_retries = {stream_max_retries}")
    return "\n".join(lines) + "\n"


def codex_env(
    home: Path,
    base_url: str,
    *,
    model: str = CODEX_MODEL,
    request_max_retries: int | None = 0,
    stream_max_retries: int | None = 0,
) -> dict[str, str]:
    """Env for Codex; writes ``<home>/.codex/config.toml`` and points CODEX_HOME at it."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = codex_config(
        base_url,
        model=model,
        request_max_retries=request_max_retries,
        stream_max_retries=stream_max_retries,
    )
    (codex_home / "config.toml").write_text(config)
    env = base_env(home)
    env.update({"CODEX_HOME": str(codex_home), CODEX_KEY_VAR: FAKE_API_KEY})
    return env


def gemini_settings(*, max_attempts: int | None = 1) -> dict[str, Any]:
    """``settings.json`` content for an offline, non-interactive Gemini CLI.

    ``max_attempts`` (``general.maxAttempts``) of 1 fails on the first API error;
    ``None`` keeps the default of 10 attempts (minutes of backoff on 429/500).
    """
    general: dict[str, Any] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    if max_attempts is not None:
        general["maxAttempts"] = max_attempts
    return {
        "security": {
            "auth": {"selectedType": "gemini-api-key"},
            # Without this --yolo is silently dropped in a new directory.
            "folderTrust": {"enabled": False},
        },
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": general,
        "ide": {"enabled": False, "hasSeenNudge": True},
    }


def gemini_env(home: Path, base_url: str, *, max_attempts: int | None = 1) -> dict[str, str]:
    """Env for Gemini CLI; writes ``<home>/.gemini/settings.json``."""
    gemini_dir = home / ".gemini"
    gemini_dir.mkdir(parents=True, exist_ok=True)
    settings = gemini_settings(max_attempts=max_attempts)
    (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    env = base_env(home)
    env.update(
        GEMINI_API_KEY=FAKE_API_KEY,
        GOOGLE_GEMINI_BASE_URL=base_url.rstrip("/"),
        GEMINI_CLI_HOME=str(home),
        # One process instead of a relaunched child: signals reach the real CLI.
        GEMINI_CLI_NO_RELAUNCH="true",
    )
    return env


def offline_env(
    cli: Cli, home: Path, base_url: str, *, max_retries: int | None = 0
) -> dict[str, str]:
    """Env (and config files under ``home``) for ``cli`` against the fake at ``base_url``.

    ``base_url`` is the server root (``ModelServer.url`` or a lane URL).
    ``max_retries`` maps to each CLI's knob: Claude ``CLAUDE_CODE_MAX_RETRIES``,
    Codex request/stream retries, Gemini ``maxAttempts`` (= retries + 1);
    ``None`` keeps the CLI's default.
    """
    home.mkdir(parents=True, exist_ok=True)
    if cli == "claude":
        return claude_env(home, base_url, max_retries=max_retries)
    if cli == "codex":
        return codex_env(
            home, base_url, request_max_retries=max_retries, stream_max_retries=max_retries
        )
    attempts = None if max_retries is None else max_retries + 1
    return gemini_env(home, base_url, max_attempts=attempts)


def headless_argv(cli: Cli, executable: str | Path, prompt: str) -> list[str]:
    """The one-shot, machine-readable, auto-approving command line for ``cli``.

    Codex must also get stdin from ``/dev/null`` (:func:`run_headless` does that).
    """
    exe = str(executable)
    if cli == "claude":
        return [
            exe,
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
    if cli == "codex":
        return [
            exe,
            "exec",
            "--json",
            *CODEX_OFFLINE_FLAGS,
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ]
    return [exe, "-p", prompt, "--output-format", "stream-json", "--yolo", "-m", GEMINI_MODEL]


@dataclass(frozen=True, slots=True)
class HeadlessRun:
    """Outcome of :func:`run_headless`: exit code, stdout JSON lines, raw stderr."""

    returncode: int
    events: list[dict[str, Any]]
    stdout: str
    stderr: str

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """Events whose ``type`` is ``kind``."""
        return [e for e in self.events if e.get("type") == kind]


def run_headless(
    cli: Cli,
    executable: str | Path,
    prompt: str,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60.0,
) -> HeadlessRun:
    """Run ``cli`` once in headless mode and collect its JSON-lines output.

    Stdin is ``/dev/null`` for every CLI (Codex waits for EOF otherwise). Lines
    that are not JSON objects are kept in ``stdout`` but not in ``events``.
    Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds.
    """
    done = subprocess.run(
        headless_argv(cli, executable, prompt),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return HeadlessRun(done.returncode, _json_lines(done.stdout), done.stdout, done.stderr)


@dataclass(frozen=True, slots=True)
class OfflineCli:
    """One CLI wired to a fake server: its executable, scratch HOME, cwd and env."""

    cli: Cli
    executable: Path
    home: Path
    cwd: Path
    env: dict[str, str]

    def argv(self, prompt: str) -> list[str]:
        """The headless command line for ``prompt`` (see :func:`headless_argv`)."""
        return headless_argv(self.cli, self.executable, prompt)

    def run(self, prompt: str, *, timeout: float = 60.0) -> HeadlessRun:
        """Run one headless turn in :attr:`cwd` (see :func:`run_headless`)."""
        return run_headless(
            self.cli, self.executable, prompt, cwd=self.cwd, env=self.env, timeout=timeout
        )


def prepare_cli(
    cli: Cli,
    root: Path,
    base_url: str,
    *,
    executable: str | Path,
    max_retries: int | None = 0,
) -> OfflineCli:
    """Create ``root/home`` and ``root/work`` and the offline env for ``cli`` at ``base_url``."""
    home, cwd = root / "home", root / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    env = offline_env(cli, home, base_url, max_retries=max_retries)
    return OfflineCli(cli, Path(executable), home, cwd, env)


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events
