"""What the rest of Chorus needs to know about a PostgreSQL store without its driver.

``psycopg`` (and its pool) cost a third of a second to import and almost nobody
uses PostgreSQL, so nothing here imports them: the store's package, the factory
and the daemon read these names, and :mod:`chorus.store._postgres` (the driver)
loads only when a PostgreSQL URL is used.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from chorus._errors import UserError
from chorus.store._errors import StoreError

#: Seconds to wait for the first connection before giving up at start.
CONNECT_TIMEOUT_S = 5.0


class StoreUnreachableError(StoreError, UserError):
    """The configured database cannot be reached or refused us (exit code 2)."""


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))
