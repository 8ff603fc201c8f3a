"""Claude Code as a body: stream-json codec, control router, bidirectional and print bodies."""

from chorus.bodies.claude._body import INITIALIZE_TIMEOUT, ClaudeBody
from chorus.bodies.claude._codec import ClaudeCodec, StdinLine
from chorus.bodies.claude._errors import ControlRequestError, code_for_status, control_payload
from chorus.bodies.claude._print import ClaudePrintBody

__all__ = [
    "INITIALIZE_TIMEOUT",
    "ClaudeBody",
    "ClaudeCodec",
    "ClaudePrintBody",
    "ControlRequestError",
    "StdinLine",
    "code_for_status",
    "control_payload",
]
