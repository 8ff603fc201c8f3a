"""What differs between SQLite and PostgreSQL SQL, in one small object.

The store's SQL is written once, in a neutral form that :meth:`Dialect.render`
turns into each database's own:

* parameters are ``?`` (positional) or ``:name`` (named); psycopg gets ``%s`` and
  ``%(name)s``;
* ``{ord}`` is the insertion-order column (SQLite's ``rowid``, PostgreSQL's ``ord``),
  ``{now}`` the database clock in seconds since the epoch (leases use it, so that
  hosts with skewed clocks agree), ``{lock}`` / ``{skip_locked}`` the row locks
  (nothing on SQLite, whose one writer serializes everything), ``{system_only}``
  the test of a job's ``options["system"]``, ``{counters}`` a locked session's
  last ``seq`` and ``n`` (kept on the row on PostgreSQL, counted on SQLite);
* ``JSON_ITEMS(:name)`` is the rows of a JSON array of strings (for ``IN (...)``),
  ``JSON_TEXT(column, key)`` one text field of a JSON column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

_NAMED = re.compile(r"(?<![:\w]):(\w+)")
_ITEMS = re.compile(r"JSON_ITEMS\((:\w+)\)")
_TEXT = re.compile(r"JSON_TEXT\(([\w.]+), (\w+)\)")


@dataclass(frozen=True, slots=True)
class Dialect:
    """One database's spelling of the neutral SQL (see the module's doc)."""

    name: str
    tokens: dict[str, str] = field(hash=False)
    items: str
    text: str
    #: psycopg's parameter style (``%s``, ``%(name)s``; a literal ``%`` doubled).
    psycopg: bool = False
    #: ``sessions`` keeps ``last_seq`` / ``last_n`` counters, bumped under a row lock.
    counters: bool = False
    #: Text columns cannot hold NUL (PostgreSQL).
    nul_free: bool = False
    #: Each batch leaves a marker row (``writer_batches``): was it committed when its
    #: connection was lost during COMMIT? (Several processes, a network between.)
    marks: bool = False

    def render(self, sql: str) -> str:
        """The neutral ``sql`` in this dialect (cached: the SQL is a fixed text)."""
        return _render(self, sql)


@lru_cache(maxsize=1024)
def _render(dialect: Dialect, sql: str) -> str:
    out = sql.format_map(dialect.tokens) if "{" in sql else sql
    out = _ITEMS.sub(lambda m: dialect.items.format(m[1]), out)
    out = _TEXT.sub(lambda m: dialect.text.format(m[1], m[2]), out)
    if dialect.psycopg:
        out = _NAMED.sub(r"%(\1)s", out.replace("%", "%%")).replace("?", "%s")
    return out


SQLITE = Dialect(
    "sqlite",
    tokens={
        "ord": "rowid",
        "now": "((julianday('now') - 2440587.5) * 86400.0)",
        "lock": "",
        "skip_locked": "",
        "system_only": "json_extract(options, '$.system') = 1",
        "counters": "(SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id),"
        " (SELECT COALESCE(MAX(n), 0) FROM raw_lines r WHERE r.session_id = s.id)",
    },
    items="SELECT value FROM json_each({0})",
    text="json_extract({0}, '$.{1}')",
)

POSTGRES = Dialect(
    "postgres",
    tokens={
        "ord": "ord",
        "now": "EXTRACT(EPOCH FROM clock_timestamp())::double precision",
        "lock": " FOR UPDATE",
        "skip_locked": " FOR UPDATE SKIP LOCKED",
        "system_only": """options::jsonb @> '{"system": true}'""",
        "counters": "s.last_seq, s.last_n",
    },
    items="SELECT jsonb_array_elements_text(CAST({0} AS jsonb))",
    text="(CAST({0} AS jsonb) ->> '{1}')",
    psycopg=True,
    counters=True,
    nul_free=True,
    marks=True,
)
