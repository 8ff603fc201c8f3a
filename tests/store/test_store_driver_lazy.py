"""The PostgreSQL driver loads only when PostgreSQL is used.

psycopg and its pool take a third of a second to import; a fresh interpreter
that imports the store, the daemon or the CLI with a SQLite store must not pay
it. Each check runs in a new interpreter: this one has psycopg loaded already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

_REPORT = """
import json, sys
result = RESULT
drivers = sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)
print(json.dumps({"drivers": drivers, "result": result}))
"""


def _fresh(code: str, result: str = "None") -> dict[str, Any]:
    """Run ``code`` in a new interpreter: the drivers it left loaded and ``result``."""
    script = code + _REPORT.replace("RESULT", result)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize(
    "code",
    [
        "import chorus.store",
        "import chorus.daemon._server",
        "from chorus.cli._app import _register; _register()",  # every ``chorus`` command
    ],
)
def test_importing_leaves_the_driver_out(code: str) -> None:
    assert _fresh(code)["drivers"] == []


def test_the_factory_loads_the_driver_for_a_postgresql_url_only() -> None:
    make = (
        "from chorus.config import ChorusConfig\n"
        "from chorus.store import open_store, audit_anchor_cell\n"
        "def kinds(url):\n"
        "    config = ChorusConfig.model_validate({'store': {'url': url}})\n"
        "    return [type(open_store(config)).__name__, type(audit_anchor_cell(config)).__name__]\n"
        "sqlite = kinds(None)\n"
        "before = 'psycopg' in sys.modules\n"
    )
    found = _fresh("import sys\n" + make, "[sqlite, before, kinds('postgresql://u@h/db')]")
    assert found["result"] == [
        ["SqliteStore", "SqliteAnchorCell"],
        False,
        ["PostgresStore", "PgAnchorCell"],
    ]
    assert found["drivers"] == ["psycopg", "psycopg_pool"]


def test_the_driver_names_load_on_first_access() -> None:
    code = (
        "import chorus.store\n"
        "from chorus.store import PostgresStore, TargetNotEmptyError, copy_sqlite_to_postgres\n"
        "from chorus.store._pg_copy import copy_sqlite_to_postgres as copy\n"
        "from chorus.store._postgres import PostgresStore as Store\n"
        "try:\n"
        "    chorus.store.NoSuchName\n"
        "    missing = None\n"
        "except AttributeError as exc:\n"
        "    missing = str(exc)\n"
    )
    result = (
        "[PostgresStore is Store is chorus.store.PostgresStore, copy_sqlite_to_postgres is copy,"
        " issubclass(TargetNotEmptyError, Exception), missing]"
    )
    found = _fresh(code, result)
    assert found["result"] == [
        True,
        True,
        True,
        "module 'chorus.store' has no attribute 'NoSuchName'",
    ]
    assert found["drivers"] == ["psycopg", "psycopg_pool"]


def test_every_public_name_resolves() -> None:
    import chorus.store

    missing = [name for name in chorus.store.__all__ if not hasattr(chorus.store, name)]
    assert missing == []
