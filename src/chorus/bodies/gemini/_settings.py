"""The ``settings.json`` Gemini CLI needs to run headless, and a check for it.

Gemini reads ``$GEMINI_CLI_HOME/.gemini/settings.json`` (else
``$HOME/.gemini/settings.json``). For Chorus it should contain at least::

    {
      "security": {"auth": {"selectedType": "gemini-api-key"},
                   "folderTrust": {"enabled": false}},
      "general": {"maxAttempts": 1}
    }

- ``security.auth.selectedType``: without it the CLI exits 41 ("Invalid auth
  method selected"); use the auth you actually have (``gemini-api-key`` with
  ``GEMINI_API_KEY``, ``vertex-ai``, ``oauth-personal`` after an interactive login).
- ``security.folderTrust.enabled: false``: else ``--yolo`` is silently dropped in
  a directory the CLI has not seen (headless), and tools are not declared.
- ``general.maxAttempts: 1``: else a 429 or 500 is retried up to 10 times over
  about four minutes, invisibly, before Chorus hears of it; with 1 the failure
  arrives in seconds and the router can fail over.
- Recommended: ``telemetry.enabled: false``, ``privacy.usageStatisticsEnabled:
  false`` (no DNS look-ups beyond the model API), ``general.enableAutoUpdate: false``.

Tests get all of this from ``chorus.testing.gemini_env``. A system-level
override (``GEMINI_CLI_SYSTEM_DEFAULTS_PATH``) was tried and is refused by the
CLI whenever a parent directory is world-writable (``/tmp``), so Chorus does not
write settings itself; it checks them and warns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RECOMMENDED_SETTINGS: Mapping[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
}
"""What to put in ``settings.json`` for Chorus (adjust ``selectedType`` to your auth)."""


def settings_path(env: Mapping[str, str]) -> Path | None:
    """Where the CLI started with ``env`` reads its user settings (``None``: no HOME)."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME")
    return Path(home) / ".gemini" / "settings.json" if home else None


def settings_problems(env: Mapping[str, str]) -> list[str]:
    """What is missing from the user settings for a headless, fail-fast run.

    Empty when everything Chorus relies on is set. Never raises: an unreadable
    file is itself a problem to report.
    """
    path = settings_path(env)
    if path is None:
        return ["neither GEMINI_CLI_HOME nor HOME is set: Gemini cannot find settings.json"]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{path} does not exist: Gemini exits 41 without an auth type"]
    except (OSError, ValueError) as exc:
        return [f"{path} is unreadable: {exc}"]
    if not isinstance(data, dict):
        return [f"{path} is not a JSON object"]
    return _missing(data, path)


def _missing(data: dict[str, Any], path: Path) -> list[str]:
    problems = []
    if _get(data, "security", "auth", "selectedType") is None:
        problems.append(f"{path}: security.auth.selectedType is unset (exit 41)")
    if _get(data, "security", "folderTrust", "enabled") is not False:
        problems.append(f"{path}: folder trust is on; --yolo may be dropped in new folders")
    attempts = _get(data, "general", "maxAttempts")
    if not isinstance(attempts, int) or attempts > 1:
        problems.append(
            f"{path}: general.maxAttempts is {attempts or 'unset (10)'}; API errors are "
            "retried for minutes before they are reported (set it to 1)"
        )
    return problems


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
