"""What every repository (one per record kind) gets from the store it is part of.

A repository is a mixin of the store: its public methods are the store's, its SQL
is sans-I/O queries (:mod:`chorus.store._query`) written once for both databases.
Writes go through the one writer (:meth:`Repo._call`: the query runs inside a
SAVEPOINT of the writer's next batch), reads through the store's reader threads
(:meth:`Repo._read`). Every text and JSON field is redacted before it is written
(:meth:`Repo._clean`, :meth:`Repo._json`), and so are the arguments of lookups
by such a field, so a value that carried a secret is found again in its
redacted form only.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from chorus.store._ops import Op
from chorus.store._query import QueryFn
from chorus.store._redact import Redactor

T = TypeVar("T")


class Repo:
    """The store's plumbing, as the repositories see it (the store provides it)."""

    redactor: Redactor

    async def _call(self, fn: QueryFn[T]) -> T:
        """Run the write query ``fn()`` on the writer; its result once committed."""
        raise NotImplementedError

    async def _read(self, fn: QueryFn[T]) -> T:
        """Run the read query ``fn()`` on a reader connection."""
        raise NotImplementedError

    def _submit(self, op: Op) -> None:
        """Queue ``op`` on the writer now (refused at once when full or closed)."""
        raise NotImplementedError

    async def _write(self, op: Op) -> Any:
        """Queue ``op``; its result once committed."""
        self._submit(op)
        assert op.future is not None
        return await op.future

    def _check_open(self) -> None:
        """Raise :class:`StoreClosedError` unless the store is open."""

    def _jobs_queued(self) -> None:
        """A job may have become claimable: wake this process's claimers (see
        :class:`~chorus.store._jobs.Jobs`)."""

    def _json(self, value: Any) -> str:
        """Redacted JSON text of a record field."""
        return json.dumps(self.redactor.redact_json(value), ensure_ascii=False)

    def _clean(self, value: str | None) -> str | None:
        """A stored text field (a session's model, folder ...) with secrets redacted."""
        return None if value is None else self.redactor.redact_text(value)

    def _names(self, **names: str | None) -> dict[str, str | None]:
        """Lookup parameters (``team``, ``recipient`` ...) redacted like the stored names."""
        return {key: self._clean(value) for key, value in names.items()}
