"""Shared fixtures: an isolated CHORUS_HOME for every test, the fake model server,
and offline environments for the real agent CLIs."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.testing import (
    Cli,
    ModelServer,
    OfflineCli,
    PostgresCluster,
    PostgresNotFoundError,
    prepare_cli,
)

#: The fixtures of a daemon shared by a module's tests (tests/daemon/conftest.py,
#: tests/dashboard/conftest.py, tests/fronts/conftest.py).
_MODULE_DAEMONS = {"module_daemon", "module_chorus", "module_dash", "module_front"}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """The tests of a module that share its daemon run on one xdist worker (with
    ``--dist loadgroup``), so the module starts one daemon, not one per worker."""
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if _MODULE_DAEMONS & set(getattr(item, "fixturenames", ())):
                item.add_marker(pytest.mark.xdist_group(f"daemon-{item.path.stem}"))
    _rerun_real_clis(config, items)
    result = yield
    _name_groups(config, items)
    return result


def _rerun_real_clis(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that drives the real CLIs and daemons (``e2e``) gets one rerun when it
    fails: on a loaded 2-core machine their timings vary far more than in-process
    tests'. pytest-rerunfailures reports each rerun (``R``, "N rerun" at the end),
    so a flaky test stays visible; one that fails twice fails the run."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if item.get_closest_marker("e2e") and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=1, reruns_delay=1))


def _name_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, name each grouped test ``<nodeid>@<group>``, the name its
    loadgroup scheduler groups by. xdist renames them itself, but since pytest 9.2
    keeps node ids structured its renaming no longer takes (pytest-xdist#1386) and
    the groups spread over every worker; this does it where it did not."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        )
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            node_id = getattr(item, "_id", None)
            if node_id is None:  # an older pytest: a plain string
                item._nodeid = item.nodeid + suffix  # type: ignore[attr-defined]
            else:
                item._id = type(node_id).parse(item.nodeid + suffix)


def _left_running(folder: Path) -> list[int]:
    """Processes (not this one) whose command line names ``folder``: bodies a test
    left running (a daemon killed with SIGKILL leaves its detached bodies, by design)."""
    mine, marker = os.getpid(), str(folder).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return pids


@pytest.fixture(autouse=True)
def _no_leftover_processes(tmp_path: Path) -> Iterator[None]:
    """After every test (its other fixtures torn down first), end what it left running
    under its own folder, so leftovers do not pile up over a whole run."""
    yield
    if not Path("/proc/self/cmdline").exists():
        return
    for pid in _left_running(tmp_path):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def chorus_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CHORUS_HOME so nothing touches the developer's state."""
    home = tmp_path / "chorus-home"
    monkeypatch.setenv("CHORUS_HOME", str(home))
    # Memory extraction (on by default) would spend a scripted turn after every job;
    # the tests that want it say so in their config or unset this.
    monkeypatch.setenv("CHORUS_MEMORY_EXTRACTION", "0")
    return home


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A started fake model server with an empty scenario; script it with ``.script()``.

    Teardown fails the test if the server raised while handling a request.
    """
    with ModelServer() as server:
        yield server
    assert server.errors == []


def agent_or_skip(cli: Cli) -> Path:
    """The installed CLI's path. Missing, the test is skipped, except under
    ``CHORUS_REQUIRE_AGENTS=1`` (set by ``./run test`` and CI), where it fails:
    a skipped end-to-end test proves nothing."""
    try:
        return find_agent(cli)
    except AgentNotFoundError as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"{cli} CLI not installed: {exc}")
        pytest.skip(f"{cli} CLI not installed: {exc}")


@pytest.fixture
def offline_cli(tmp_path: Path, model_server: ModelServer) -> Callable[..., OfflineCli]:
    """Factory ``offline_cli(cli, max_retries=0, lane="default")`` -> :class:`OfflineCli`.

    Each call gets fresh ``home`` and ``work`` dirs under ``tmp_path`` and points
    the CLI at ``model_server`` (skips when the CLI is not installed).
    """
    counter = iter(range(1_000_000))

    def make(cli: Cli, *, max_retries: int | None = 0, lane: str = "default") -> OfflineCli:
        executable = agent_or_skip(cli)
        root = tmp_path / f"{cli}-{next(counter)}"
        return prepare_cli(
            cli,
            root,
            model_server.lane_url(lane),
            executable=executable,
            max_retries=max_retries,
        )

    return make


_databases = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL server (Debian's package) for the whole test session.
    Missing, its tests skip, except under ``CHORUS_REQUIRE_AGENTS=1`` (./run test,
    CI), where they fail: a skipped backend proves nothing."""
    try:
        cluster = PostgresCluster.start()
    except (PostgresNotFoundError, RuntimeError) as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"PostgreSQL is required (CHORUS_REQUIRE_AGENTS=1): {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")
    with cluster:
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster) -> str:
    """The URL of a fresh, empty database in that server."""
    return pg_cluster.create_database(f"t{next(_databases)}")


@pytest.fixture
def escape_tally(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``escape_tally(family, body, mode, held=..., control=...)``: records one tried
    escape (``held``: the boundary stopped it; ``control``: the same attack worked
    with that boundary off) to the JSONL file named by ``CHORUS_ESCAPE_TALLY``, which
    ``bench/bench_escapes.py`` prints as tried / held per body and mode. Recording
    asserts nothing: the test asserts ``held`` itself."""
    out = os.environ.get("CHORUS_ESCAPE_TALLY")

    def record(
        family: str, body: str, mode: str, *, held: bool, control: bool | None = None
    ) -> None:
        if not out:
            return
        row = {"test": request.node.nodeid, "family": family, "body": body, "mode": mode}
        row |= {"held": held, "control": control}
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    return record
