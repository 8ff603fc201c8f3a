"""The daemon: durable job queue, supervisor of bodies, REST + SSE on a unix socket.

Everything is loaded on first use: the client (``DaemonClient``) is stdlib only,
so that the everyday commands reach the socket fast; the start/stop helpers load
the config, and the supervisor, which pulls in the policy, the store and every
body, only when asked for.
"""

from __future__ import annotations

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from chorus.daemon._client import (
        DaemonClient,
        DaemonError,
        DaemonLostError,
        NotRunningError,
        is_responding,
    )
    from chorus.daemon._lifecycle import end_bodies_left, spawn_daemon, stop_daemon
    from chorus.daemon._requests import prompt_problem
    from chorus.daemon._supervisor import Supervisor
    from chorus.daemon._tools import install_tools
    from chorus.jobs import JobRequest

__all__ = [
    "DaemonClient",
    "DaemonError",
    "DaemonLostError",
    "JobRequest",
    "NotRunningError",
    "Supervisor",
    "end_bodies_left",
    "install_tools",
    "is_responding",
    "prompt_problem",
    "spawn_daemon",
    "stop_daemon",
]

_CLIENT = frozenset(
    {"DaemonClient", "DaemonError", "DaemonLostError", "NotRunningError", "is_responding"}
)
_LIFECYCLE = frozenset({"end_bodies_left", "spawn_daemon", "stop_daemon"})
_SUPERVISOR = frozenset({"Supervisor"})
_REQUESTS = frozenset({"prompt_problem"})


def __getattr__(name: str) -> Any:
    if name in _CLIENT:
        from chorus.daemon import _client

        return getattr(_client, name)
    if name in _LIFECYCLE:
        from chorus.daemon import _lifecycle

        return getattr(_lifecycle, name)
    if name in _REQUESTS:
        from chorus.daemon import _requests

        return getattr(_requests, name)
    if name == "install_tools":
        from chorus.daemon._tools import install_tools

        return install_tools
    if name == "JobRequest":
        from chorus.jobs import JobRequest

        return JobRequest
    if name in _SUPERVISOR:
        from chorus.daemon import _supervisor

        return getattr(_supervisor, name)
    raise AttributeError(f"module 'chorus.daemon' has no attribute {name!r}")
