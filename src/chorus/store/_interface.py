"""The store contract: what both backends (SQLite, PostgreSQL) provide.

:class:`Store` is the composition of one repository per record kind (sessions,
events and raw lines, control requests, jobs, worker nodes and leases, routines,
worktrees, team mailboxes, flags): each repository module holds its records'
methods and SQL, written once for both databases (:mod:`chorus.store._query`,
:mod:`chorus.store._dialect`). A backend (:mod:`chorus.store._core`) adds the
plumbing: how to connect, the writer, the readers.

Every method is async and safe to call from the event loop: a backend never
blocks the loop on I/O. Writes are serialized by one writer and resolve only
after their transaction committed ("nothing acknowledged is lost"). Every
string a write carries (events, raw lines, prompts, payloads, metadata) is
redacted *before* it is written; reads return the redacted form.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

from chorus.store._cluster import Nodes
from chorus.store._controls import Controls
from chorus.store._errors import StoreError
from chorus.store._events import Events
from chorus.store._flags import Flags
from chorus.store._jobs import Jobs
from chorus.store._mailbox import Mailboxes
from chorus.store._ops import Op
from chorus.store._query import QueryFn
from chorus.store._records import JsonDict, StoreOutage
from chorus.store._redact import Redactor
from chorus.store._routines import Routines
from chorus.store._sessions import Sessions
from chorus.store._worktrees import Worktrees


class Store(Sessions, Events, Controls, Jobs, Nodes, Routines, Worktrees, Mailboxes, Flags, ABC):
    """The durable log and the daemon's tables: the repositories, composed. Use
    ``async with`` (or :meth:`start` then :meth:`close`). Calls before ``start`` or
    after ``close`` raise :class:`StoreClosedError`."""

    #: Applied to everything before it is written (and by replay to its output).
    redactor: Redactor
    #: True when several daemons (worker nodes) may share this store.
    shared: bool = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def start(self) -> None:
        """Open the database and apply pending migrations. Call once."""

    @abstractmethod
    async def close(self) -> None:
        """Finish queued writes, end subscriptions, release every connection.
        Idempotent."""

    # -- the plumbing a backend provides (see chorus.store._repo) ---------------------

    @abstractmethod
    def _submit(self, op: Op) -> None: ...

    @abstractmethod
    async def _call(self, fn: QueryFn[Any]) -> Any: ...

    @abstractmethod
    async def _read(self, fn: QueryFn[Any]) -> Any: ...

    # -- maintenance ---------------------------------------------------------------------

    @abstractmethod
    async def integrity_check(self) -> list[str]:
        """The backend's own consistency check; ``["ok"]`` when clean."""

    async def stale_mirrors(self) -> list[str]:
        """Sessions whose JSONL mirror is not exactly the log (a crash after a commit
        and before the mirror write); :meth:`rebuild_mirror` fixes each. A backend
        without mirrors has none."""
        return []

    # -- one of everything across the cluster -----------------------------------

    def outage(self) -> StoreOutage | None:
        """Set while the (shared) database cannot be reached and writes wait for it;
        None when all is well (always, for an embedded store)."""
        return None

    async def try_lead(self, role: str) -> bool:
        """Become, or stay, the one process of the cluster that does ``role`` (e.g. fire
        the routines); True while this process holds it. Call it again and again: the
        answer turns False once the hold is lost (its connection died). A store that
        only one daemon uses always answers True."""
        return True

    async def list_provider_health(self) -> list[JsonDict]:
        """Provider health rows (:meth:`chorus.router.ProviderHealth.to_json`) shared by
        the cluster; a store that only one daemon uses shares none."""
        return []

    async def put_provider_health(self, key: str, data: JsonDict, *, node: str) -> None:
        """Store one provider's health for the whole cluster (the last writer wins)."""
        raise StoreError(f"{type(self).__name__} does not share provider health")
