"""Bodies: the agent CLIs, each behind a transport and a sans-I/O codec."""

from collections.abc import Callable, Iterable

from chorus.bodies._body import (
    PERMISSION_MODES,
    TERMINAL_TYPES,
    Body,
    BodyOptions,
    McpServer,
    crash_error,
)
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._catalog import BodyInfo, body_catalog
from chorus.bodies._channel import (
    NO_SESSION,
    Channel,
    channel_key,
    channel_key_path,
    channel_servers,
    close_channel,
    open_channel,
    relay_server,
    session_token,
    token_channel,
)
from chorus.bodies._channel import SERVER_NAME as MCP_SERVER_NAME
from chorus.bodies._detached import (
    BodyHandle,
    DetachedTransport,
    end_detached,
    kill_detached_left,
)
from chorus.bodies._detached import start_time as process_start_time
from chorus.bodies._framing import MAX_LINE_BYTES, LineFramer
from chorus.bodies._group import signal_members
from chorus.bodies._lifecycle import TRANSITIONS as BODY_TRANSITIONS
from chorus.bodies._lifecycle import (
    TURN_STATES,
    BodyState,
    IllegalBodyTransitionError,
)
from chorus.bodies._lifecycle import Lifecycle as BodyLifecycle
from chorus.bodies._registry import (
    CLI_OF,
    body_class,
    body_names,
    check_installed,
    create_body,
)
from chorus.bodies._tools import normalize_tool
from chorus.bodies._transport import ProcessTransport, RawTap, SpawnSpec, kill_live_groups
from chorus.config import ChorusConfig
from chorus.events import Event
from chorus.permissions import (
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    allow_all,
    rule_callback,
)


def replay_codecs(
    config: ChorusConfig | None = None,
) -> dict[str, Callable[[], Callable[[str], Iterable[Event]]]]:
    """A fresh replay codec factory per body name (built-ins, ACP agents, config's
    ACP agents), for the store's ``register_replay_codec``. Imports every body."""
    from chorus.bodies._replay import replay_codecs as build

    return build(config)


__all__ = [
    "BODY_TRANSITIONS",
    "CLI_OF",
    "MAX_LINE_BYTES",
    "MCP_SERVER_NAME",
    "NO_SESSION",
    "PERMISSION_MODES",
    "TERMINAL_TYPES",
    "TURN_STATES",
    "Body",
    "BodyHandle",
    "BodyInfo",
    "BodyLifecycle",
    "BodyOptions",
    "BodyState",
    "Capabilities",
    "Channel",
    "DetachedTransport",
    "IllegalBodyTransitionError",
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
    "body_catalog",
    "body_class",
    "body_names",
    "channel_key",
    "channel_key_path",
    "channel_servers",
    "check_installed",
    "close_channel",
    "crash_error",
    "create_body",
    "end_detached",
    "kill_detached_left",
    "kill_live_groups",
    "normalize_tool",
    "open_channel",
    "process_start_time",
    "relay_server",
    "replay_codecs",
    "rule_callback",
    "session_token",
    "signal_members",
    "token_channel",
]
