"""The job port: what the features above the session layer (routines, the dashboard)
need from the daemon's job runner. The daemon's ``Supervisor`` has this shape; the
features name only this Protocol, never the Supervisor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from chorus.config import ChorusConfig
from chorus.events import JobEnded
from chorus.jobs._request import JobRequest
from chorus.store import JobRecord, Store

if TYPE_CHECKING:
    from chorus.policy import AuditLog
    from chorus.router import HealthBook, Router


class JobEndLike(Protocol):
    """A job's end as the daemon's outcome bus delivers it."""

    @property
    def job(self) -> JobRecord: ...

    @property
    def ended(self) -> JobEnded: ...


#: Run at each job's end (the retry queue, the heartbeat's ticks).
EndHandler = Callable[[JobEndLike], Awaitable[None]]


class OutcomeBus(Protocol):
    """Where the features above the daemon hear of each job's end."""

    def on_end(self, handler: EndHandler) -> None: ...


#: Hook that adds fields to the daemon's ``/status``.
StatusHook = Callable[[], dict[str, Any]]


class JobPort(Protocol):
    """Submit, steer and stop jobs; read the store, config and provider health."""

    @property
    def store(self) -> Store: ...

    @property
    def config(self) -> ChorusConfig: ...

    @property
    def audit(self) -> AuditLog | None: ...

    @property
    def router(self) -> Router: ...

    @property
    def health(self) -> HealthBook: ...

    @property
    def outcomes(self) -> OutcomeBus: ...

    @property
    def status_hooks(self) -> list[StatusHook]: ...

    def provider_key(self, body: str) -> str: ...

    def unready(self, body: str) -> str | None: ...

    async def submit(self, req: JobRequest) -> JobRecord: ...

    async def steer(self, job_id: str, text: str) -> dict[str, Any]: ...

    async def interrupt(self, job_id: str) -> str: ...
