"""The client side of the daemon: what the CLI and the fronts need to talk to it.

The socket client (:class:`DaemonClient`, stdlib only, so that the everyday
commands reach the socket fast), the daemon's files under ``CHORUS_HOME/run``,
starting and stopping it (and installing it as a service), the checks made
before a daemon starts, and the checks on a job request made before it is sent.
Everything but the socket client is loaded on first use.
"""

from __future__ import annotations

from chorus.client._client import (
    DaemonClient,
    DaemonError,
    DaemonLostError,
    NotRunningError,
    chorus_home,
    is_responding,
    start_daemon,
)

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from chorus.client._checks import load_checked_config
    from chorus.client._lifecycle import (
        acquire_lock,
        end_bodies_left,
        read_pid,
        spawn_daemon,
        stop_daemon,
    )
    from chorus.client._paths import (
        health_path,
        load_health_file,
        lock_path,
        log_path,
        pid_path,
        socket_path,
    )
    from chorus.client._requests import prompt_problem
    from chorus.client._service import (
        KINDS,
        ServiceSpec,
        ServiceToolMissingError,
        default_kind,
        disable,
        enable,
        service_spec,
        state,
        unit_text,
    )

__all__ = [
    "KINDS",
    "DaemonClient",
    "DaemonError",
    "DaemonLostError",
    "NotRunningError",
    "ServiceSpec",
    "ServiceToolMissingError",
    "acquire_lock",
    "chorus_home",
    "default_kind",
    "disable",
    "enable",
    "end_bodies_left",
    "health_path",
    "is_responding",
    "load_checked_config",
    "load_health_file",
    "lock_path",
    "log_path",
    "pid_path",
    "prompt_problem",
    "read_pid",
    "service_spec",
    "socket_path",
    "spawn_daemon",
    "start_daemon",
    "state",
    "stop_daemon",
    "unit_text",
]

_CHECKS = frozenset({"load_checked_config"})
_LIFECYCLE = frozenset(
    {"acquire_lock", "end_bodies_left", "read_pid", "spawn_daemon", "stop_daemon"}
)
_PATHS = frozenset(
    {"health_path", "load_health_file", "lock_path", "log_path", "pid_path", "socket_path"}
)
_SERVICE = frozenset(
    {
        "KINDS",
        "ServiceSpec",
        "ServiceToolMissingError",
        "default_kind",
        "disable",
        "enable",
        "service_spec",
        "state",
        "unit_text",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CHECKS:
        from chorus.client import _checks

        return getattr(_checks, name)
    if name in _LIFECYCLE:
        from chorus.client import _lifecycle

        return getattr(_lifecycle, name)
    if name in _PATHS:
        from chorus.client import _paths

        return getattr(_paths, name)
    if name == "prompt_problem":
        from chorus.client import _requests

        return _requests.prompt_problem
    if name in _SERVICE:
        from chorus.client import _service

        return getattr(_service, name)
    raise AttributeError(f"module 'chorus.client' has no attribute {name!r}")
