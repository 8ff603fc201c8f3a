"""The daemon: durable job queue, supervisor of bodies, REST + SSE on a unix socket.

The client side (``DaemonClient``, start/stop helpers) is imported eagerly; the
supervisor, which pulls in the policy, the store and every body, only when asked
for, so that each ``chorus`` command starts without loading the daemon's guts.
"""

from typing import TYPE_CHECKING, Any

from chorus.daemon._client import DaemonClient
from chorus.daemon._lifecycle import DaemonError, is_responding, spawn_daemon, stop_daemon
from chorus.daemon._requests import prompt_problem

if TYPE_CHECKING:
    from chorus.daemon._supervisor import JobRequest, Supervisor

__all__ = [
    "DaemonClient",
    "DaemonError",
    "JobRequest",
    "Supervisor",
    "is_responding",
    "prompt_problem",
    "spawn_daemon",
    "stop_daemon",
]

_LAZY = frozenset({"JobRequest", "Supervisor"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from chorus.daemon import _supervisor

        return getattr(_supervisor, name)
    raise AttributeError(f"module 'chorus.daemon' has no attribute {name!r}")
