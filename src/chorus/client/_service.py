"""Run the daemon at login: a systemd user unit (Linux) or a launchd agent (macOS).

The unit runs ``python -m chorus.daemon`` for one ``CHORUS_HOME`` with the PATH
of the shell that installed it (so the agent CLIs are found), appends its output
to ``daemon.log`` as a daemon Chorus starts itself would, and restarts it only
when it fails (``chorus stop`` stays stopped). One unit per home: the default
home's is ``chorus``, another home's is ``chorus-<8 hex of its path>``.

Writing the file is pure (:func:`unit_text`); turning it on asks ``systemctl
--user`` or ``launchctl``, and says so plainly when that tool is not there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from chorus.client._paths import log_path
from chorus.config import chorus_home

KINDS = ("systemd", "launchd")


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What the unit runs and where its file goes."""

    kind: str
    name: str
    path: Path
    home: Path
    python: str
    env_path: str
    log: Path


def default_kind() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def service_spec(kind: str | None = None) -> ServiceSpec:
    """The unit for this ``CHORUS_HOME`` (``kind``: systemd or launchd, default by OS)."""
    kind = kind or default_kind()
    home = chorus_home().resolve()
    name = _name(home)
    if kind == "systemd":
        config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        path = config / "systemd" / "user" / f"{name}.service"
    else:
        path = Path.home() / "Library" / "LaunchAgents" / f"dev.chorus.{name}.plist"
    env_path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return ServiceSpec(kind, name, path, home, sys.executable, env_path, log_path())


def _name(home: Path) -> str:
    if home == (Path.home() / ".chorus").resolve():
        return "chorus"
    return "chorus-" + hashlib.sha256(str(home).encode()).hexdigest()[:8]


def unit_text(spec: ServiceSpec) -> str:
    """The unit file's text."""
    return _systemd(spec) if spec.kind == "systemd" else _launchd(spec)


def _systemd(spec: ServiceSpec) -> str:
    return "\n".join(
        [
            "# Written by `chorus service install`; remove with `chorus service uninstall`.",
            "[Unit]",
            f"Description=Chorus daemon for {spec.home}",
            "",
            "[Service]",
            "Type=simple",
            f'Environment="CHORUS_HOME={spec.home}"',
            f'Environment="PATH={spec.env_path}"',
            f"ExecStart={spec.python} -m chorus.daemon",
            "Restart=on-failure",
            "RestartSec=5",
            f"StandardOutput=append:{spec.log}",
            f"StandardError=append:{spec.log}",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def _launchd(spec: ServiceSpec) -> str:
    def string(value: object) -> str:
        text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return f"<string>{text}</string>"

    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"'
            ' "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
            '<plist version="1.0">',
            "<dict>",
            f"  <key>Label</key>{string('dev.chorus.' + spec.name)}",
            "  <key>ProgramArguments</key>",
            f"  <array>{string(spec.python)}{string('-m')}{string('chorus.daemon')}</array>",
            "  <key>EnvironmentVariables</key>",
            f"  <dict><key>CHORUS_HOME</key>{string(spec.home)}"
            f"<key>PATH</key>{string(spec.env_path)}</dict>",
            "  <key>RunAtLoad</key><true/>",
            "  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>",
            f"  <key>StandardOutPath</key>{string(spec.log)}",
            f"  <key>StandardErrorPath</key>{string(spec.log)}",
            "</dict>",
            "</plist>",
            "",
        ]
    )


# -- turning it on and off ----------------------------------------------------------------


class ServiceToolMissingError(Exception):
    """``systemctl`` / ``launchctl`` is not on this machine (or has no user manager)."""


def _tool(spec: ServiceSpec) -> str:
    tool = "systemctl" if spec.kind == "systemd" else "launchctl"
    found = shutil.which(tool)
    if found is None:
        raise ServiceToolMissingError(f"{tool} is not installed here")
    return found


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def _checked(argv: list[str]) -> str:
    done = _run(argv)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
        raise ServiceToolMissingError(f"`{' '.join(argv[:3])} ...` failed: {why}")
    return done.stdout


def enable(spec: ServiceSpec) -> None:
    """Load the unit and start it now (and at every login)."""
    tool = _tool(spec)
    if spec.kind == "systemd":
        _checked([tool, "--user", "daemon-reload"])
        _checked([tool, "--user", "enable", "--now", f"{spec.name}.service"])
    else:
        _checked([tool, "bootstrap", f"gui/{os.getuid()}", str(spec.path)])


def disable(spec: ServiceSpec) -> None:
    """Stop the unit and take it out of login."""
    tool = _tool(spec)
    if spec.kind == "systemd":
        _checked([tool, "--user", "disable", "--now", f"{spec.name}.service"])
    else:
        _checked([tool, "bootout", f"gui/{os.getuid()}/dev.chorus.{spec.name}"])


def state(spec: ServiceSpec) -> str:
    """What the service manager says (``active``, ``inactive``, ...), or why it cannot."""
    try:
        tool = _tool(spec)
    except ServiceToolMissingError as exc:
        return f"unknown: {exc}"
    if spec.kind == "systemd":
        done = _run([tool, "--user", "is-active", f"{spec.name}.service"])
        return done.stdout.strip() or (done.stderr.strip() or "unknown")
    done = _run([tool, "print", f"gui/{os.getuid()}/dev.chorus.{spec.name}"])
    return "loaded" if done.returncode == 0 else "not loaded"
