"""Gemini CLI as a Chorus body: ACP (primary) and one-shot ``stream-json`` runs.

- :class:`GeminiAcpBody`: ``gemini --acp``, the generic ACP body with Gemini's
  quirks (see :data:`chorus.bodies.acp.GEMINI_QUIRKS`).
- :class:`GeminiBody`: ``gemini --output-format stream-json --yolo`` (prompt on stdin),
  a process per turn, chained with ``--resume``; :class:`GeminiStreamCodec` is
  its sans-I/O codec.
- The ``settings.json`` Gemini needs for either: :data:`RECOMMENDED_SETTINGS`,
  checked by :func:`settings_problems` (each body warns at start).
"""

from chorus.bodies.gemini._body import GEMINI_HEADLESS_CAPABILITIES, GeminiAcpBody, GeminiBody
from chorus.bodies.gemini._codec import GeminiStreamCodec
from chorus.bodies.gemini._errors import (
    EXIT_BAD_AUTH,
    EXIT_BAD_INPUT,
    RunInProgressError,
    exit_error,
    result_error,
    status_for_exit,
)
from chorus.bodies.gemini._settings import RECOMMENDED_SETTINGS, settings_path, settings_problems

__all__ = [
    "EXIT_BAD_AUTH",
    "EXIT_BAD_INPUT",
    "GEMINI_HEADLESS_CAPABILITIES",
    "RECOMMENDED_SETTINGS",
    "GeminiAcpBody",
    "GeminiBody",
    "GeminiStreamCodec",
    "RunInProgressError",
    "exit_error",
    "result_error",
    "settings_path",
    "settings_problems",
    "status_for_exit",
]
