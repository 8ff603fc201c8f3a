"""A throwaway PostgreSQL cluster for tests and benchmarks (Debian's ``postgresql``).

``initdb`` refuses to run as root, so as root every server command runs as the
``postgres`` user (``runuser``) in a directory under ``/tmp`` that user owns.
The server listens on a free loopback port only, with durability switched off
(``fsync=off``): it lives for one test session and is deleted afterwards.

Typical use::

    with PostgresCluster.start() as cluster:
        url = cluster.create_database("t1")   # postgresql://chorus@127.0.0.1:PORT/t1
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

#: The superuser initdb creates (trust authentication, loopback only).
SUPERUSER = "chorus"
_SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
    " -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB"
)


class PostgresNotFoundError(RuntimeError):
    """``initdb``/``pg_ctl`` are not installed (Debian package ``postgresql``)."""


def postgres_bin_dir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: PATH first, then the newest
    ``/usr/lib/postgresql/<version>/bin`` (Debian does not put it on PATH)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if not candidates:
        raise PostgresNotFoundError(
            "PostgreSQL server binaries not found: install Debian's 'postgresql' package"
            " (./run test does it)"
        )
    return Path(candidates[-1]).parent


def _version_of(initdb: str) -> int:
    version = Path(initdb).parent.parent.name
    return int(version) if version.isdigit() else 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresCluster:
    """One running server. Create it with :meth:`start`; :meth:`stop` deletes it."""

    def __init__(self, root: Path, port: int, bin_dir: Path) -> None:
        self.root = root
        self.port = port
        self.bin_dir = bin_dir

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls) -> PostgresCluster:
        """initdb into a fresh directory and start the server (about a second)."""
        bin_dir = postgres_bin_dir()
        root = Path(tempfile.mkdtemp(prefix="chorus-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        cluster = cls(root, free_port(), bin_dir)
        try:
            cluster._run(
                "initdb",
                "-D",
                str(cluster.data_dir),
                "-A",
                "trust",
                "-U",
                SUPERUSER,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
            cluster._pg_ctl_start()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cluster

    def _pg_ctl_start(self) -> None:
        options = f"-p {self.port} -k {self.root} {_SERVER_OPTIONS}"
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", log, "-w", "-o", options, "start")

    def _run(self, tool: str, *args: str) -> None:
        argv = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=self.root, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def stop_server(self) -> None:
        """Stop the server but keep its files (a database outage, for tests)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def start_server(self) -> None:
        """Start it again on the same port after :meth:`stop_server`."""
        self._pg_ctl_start()

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once and delete its files. Idempotent."""
        if self.root.exists():
            with contextlib.suppress(RuntimeError):  # already stopped: the files go anyway
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "stop")
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
