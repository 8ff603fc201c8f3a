"""The daemon: durable job queue, supervisor of bodies, REST + SSE on a unix socket.

Everything is loaded on first use. The client side (``DaemonClient``, starting and
stopping a daemon, the request checks) lives in :mod:`chorus.client` and is named
here too; the supervisor, which pulls in the policy, the store and every body, is
loaded only when asked for.
"""

from __future__ import annotations

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from chorus.client import (
        DaemonClient,
        DaemonError,
        DaemonLostError,
        NotRunningError,
        end_bodies_left,
        is_responding,
        prompt_problem,
        spawn_daemon,
        stop_daemon,
    )
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
    {
        "DaemonClient",
        "DaemonError",
        "DaemonLostError",
        "NotRunningError",
        "end_bodies_left",
        "is_responding",
        "prompt_problem",
        "spawn_daemon",
        "stop_daemon",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CLIENT:
        import chorus.client

        return getattr(chorus.client, name)
    if name == "install_tools":
        from chorus.daemon._tools import install_tools

        return install_tools
    if name == "JobRequest":
        from chorus.jobs import JobRequest

        return JobRequest
    if name == "Supervisor":
        from chorus.daemon._supervisor import Supervisor

        return Supervisor
    raise AttributeError(f"module 'chorus.daemon' has no attribute {name!r}")
