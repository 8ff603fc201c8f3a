"""Claude Code as a body: stream-json codec, control router, bidirectional and print bodies."""

from chorus.bodies.claude._body import INITIALIZE_TIMEOUT, ClaudeBody
from chorus.bodies.claude._codec import ClaudeCodec, StdinLine
from chorus.bodies.claude._errors import ControlRequestError, code_for_status
from chorus.bodies.claude._print import ClaudePrintBody
from chorus.bodies.claude._router import ControlRouter

__all__ = [
    "INITIALIZE_TIMEOUT",
    "ClaudeBody",
    "ClaudeCodec",
    "ClaudePrintBody",
    "ControlRequestError",
    "ControlRouter",
    "StdinLine",
    "code_for_status",
]


def _register_replay() -> None:
    # `chorus replay` re-runs a session's raw stdout through this codec.
    from chorus.store import register_replay_codec

    register_replay_codec("claude", lambda: ClaudeCodec().feed)


_register_replay()
