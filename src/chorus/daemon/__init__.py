"""The daemon: durable job queue, supervisor of bodies, REST + SSE on a unix socket."""

from chorus.daemon._client import DaemonClient
from chorus.daemon._lifecycle import DaemonError, is_responding, spawn_daemon, stop_daemon
from chorus.daemon._supervisor import JobRequest, Supervisor

__all__ = [
    "DaemonClient",
    "DaemonError",
    "JobRequest",
    "Supervisor",
    "is_responding",
    "spawn_daemon",
    "stop_daemon",
]
