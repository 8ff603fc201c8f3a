"""Bodies: the agent CLIs, each behind a transport and a sans-I/O codec."""

from chorus.bodies._body import (
    PERMISSION_MODES,
    TERMINAL_TYPES,
    Body,
    BodyOptions,
    McpServer,
    crash_error,
)
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._framing import MAX_LINE_BYTES, LineFramer
from chorus.bodies._registry import (
    CLI_OF,
    body_class,
    body_names,
    check_installed,
    create_body,
)
from chorus.bodies._tools import normalize_tool
from chorus.bodies._transport import ProcessTransport, RawTap, SpawnSpec
from chorus.permissions import (
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    allow_all,
    rule_callback,
)

__all__ = [
    "CLI_OF",
    "MAX_LINE_BYTES",
    "PERMISSION_MODES",
    "TERMINAL_TYPES",
    "Body",
    "BodyOptions",
    "Capabilities",
    "LineFramer",
    "McpServer",
    "PermissionAnswer",
    "PermissionAsk",
    "PermissionCallback",
    "ProcessTransport",
    "RawTap",
    "SpawnSpec",
    "Support",
    "allow_all",
    "body_class",
    "body_names",
    "check_installed",
    "crash_error",
    "create_body",
    "normalize_tool",
    "rule_callback",
]
