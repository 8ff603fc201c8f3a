"""The gateway token, and the ``[gateway]``/``[brain]`` settings (their models live
in :mod:`chorus.config`, re-exported here).

The TCP listener always requires a bearer token: ``gateway.token`` when set,
else the contents of ``CHORUS_HOME/run/gateway.token`` (created on first use
with mode 0600; refused if group or others can read it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from chorus.config import (
    DEFAULT_PORT,
    BrainConfig,
    GatewayConfig,
    GatewaySettings,
    load_gateway_settings,
    run_dir,
    settings_from_tables,
)
from chorus.gateway._errors import GatewayTokenError

__all__ = [
    "DEFAULT_PORT",
    "BrainConfig",
    "GatewayConfig",
    "GatewaySettings",
    "gateway_token",
    "load_gateway_settings",
    "settings_from_tables",
    "token_path",
]

# -- the token -------------------------------------------------------------------------


def token_path() -> Path:
    """``CHORUS_HOME/run/gateway.token``."""
    return run_dir() / "gateway.token"


def gateway_token(config: GatewayConfig) -> str:
    """The token TCP clients must send: the configured one, else the token file's,
    creating the file (mode 0600) with a fresh random token on first use.

    Raises :class:`GatewayTokenError` when the file is readable by group or
    others, or empty.
    """
    if config.token is not None:
        return config.token
    path = token_path()
    with contextlib.suppress(FileExistsError):
        _create_token_file(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise GatewayTokenError(
            f"{path} has mode {mode:o}; it must be 600 (chmod 600 {path}) since it grants access"
        )
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise GatewayTokenError(f"{path} is empty; delete it to get a new token")
    return token


def _create_token_file(path: Path) -> None:
    """Create ``path`` exclusively with mode 0600 (never a window where others can read)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
