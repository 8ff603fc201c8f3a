"""The store's SQL as plain generators: sans-I/O, run on either database.

A *query* is a generator that yields :class:`Stmt` (and :class:`Notify`) and is
sent each one's result; its return value is the query's. It does no I/O itself,
so the very same code runs on SQLite and PostgreSQL: :func:`run` drives it on a
:class:`Db` (a connection adapter, see :mod:`chorus.store._db`), which renders
the neutral SQL in its :class:`~chorus.store._dialect.Dialect`. Compose with
``yield from``; an error of a statement is raised inside the query, where it
may be handled (e.g. a SAVEPOINT rolled back).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from chorus.store._dialect import Dialect
from chorus.store._errors import StoreError

T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]
Fetch = Literal["one", "all", "count", "many"]

#: A LIMIT both SQLite and PostgreSQL read as "all".
NO_LIMIT = 1 << 62


class ConstraintError(StoreError):
    """A statement broke a constraint of the schema (raised inside the query)."""


@dataclass(frozen=True, slots=True)
class Stmt:
    """One statement: ``fetch`` says what comes back (a row or None, the rows, the
    row count; ``many`` runs it once per parameter set in ``params``)."""

    sql: str
    params: Any = ()
    fetch: Fetch = "count"
    #: Run as written (schema DDL): no rendering, no parameters.
    literal: bool = False


@dataclass(frozen=True, slots=True)
class Notify:
    """Wake the other processes listening on ``channel`` (at commit; PostgreSQL only)."""

    channel: str
    payload: str = ""


Query = Generator[Stmt | Notify, Any, T]
#: Makes a fresh query (a write may be retried, and a generator runs once).
QueryFn = Callable[[], Query[T]]


class Db(Protocol):
    """A connection: runs one rendered statement (see :mod:`chorus.store._db`)."""

    dialect: Dialect

    def execute(self, stmt: Stmt | Notify) -> Any: ...


def run(db: Db, query: Query[T]) -> T:
    """Drive ``query`` on ``db``: each statement's result (or error) goes back in."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            stmt = query.send(reply) if error is None else query.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply, error = None, None
        try:
            reply = db.execute(stmt)
        except Exception as exc:  # raised inside the query, which may handle it
            error = exc


# -- statement helpers (``yield from`` them) ------------------------------------------------


def one(sql: str, params: Params = ()) -> Query[Any]:
    """The first row (a tuple), or None."""
    row = yield Stmt(sql, params, "one")
    return row


def rows(sql: str, params: Params = ()) -> Query[list[Any]]:
    """Every row."""
    found: list[Any] = yield Stmt(sql, params, "all")
    return found


def count(sql: str, params: Params = ()) -> Query[int]:
    """Run a statement; the number of rows it changed."""
    changed: int = yield Stmt(sql, params, "count")
    return changed


def many(sql: str, param_sets: Sequence[Params]) -> Query[None]:
    """Run a statement once per parameter set."""
    if param_sets:
        yield Stmt(sql, list(param_sets), "many")


def notify(channel: str, payload: str = "") -> Query[None]:
    yield Notify(channel, payload)


def values(query: Query[list[Any]]) -> Query[list[Any]]:
    """The first column of every row."""
    found = yield from query
    return [row[0] for row in found]


def update_sql(table: str, columns: Sequence[str], where: str) -> str:
    """``UPDATE table SET c = :c, ... WHERE where``; the columns are the caller's fixed
    column names, never input (each caller checks them against its table's)."""
    assignments = ", ".join(f"{column} = :{column}" for column in columns)
    return f"UPDATE {table} SET {assignments} WHERE {where}"
