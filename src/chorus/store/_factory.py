"""Pick the store backend the configuration asks for."""

from __future__ import annotations

from chorus.config import ChorusConfig, load_config
from chorus.store._interface import Store
from chorus.store._sqlite import SqliteStore


def open_store(config: ChorusConfig | None = None) -> Store:
    """An unstarted store: PostgreSQL when ``[store] url`` is set, else SQLite in
    CHORUS_HOME. ``start()`` raises :class:`StoreUnreachableError` (exit code 2,
    the URL in the message with its password redacted) when the database is down."""
    config = config or load_config()
    sc = config.store
    if sc.url is None:
        return SqliteStore()
    from chorus.store._postgres import PostgresStore  # the driver loads only when used

    return PostgresStore(sc.url, pool_size=sc.pool_size, max_queue=sc.max_buffered)
