"""Job requests are checked before anything is written: shape and prompt size
(cases 5 and 7). The app runs in-process over a real store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from chorus.config import load_config
from chorus.daemon import Supervisor
from chorus.daemon._api import build_app
from chorus.store import Redactor, SqliteStore

pytestmark = pytest.mark.faults


@pytest.fixture
async def api(chorus_home: Path) -> AsyncIterator[tuple[httpx.AsyncClient, SqliteStore]]:
    async with SqliteStore(redactor=Redactor()) as store:
        app = build_app(Supervisor(store, load_config()))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chorus") as client:
            yield client, store


async def _nothing_written(store: SqliteStore) -> None:
    assert await store.list_jobs() == []
    assert await store.list_sessions() == []


async def test_a_prompt_over_the_limit_is_refused_before_anything_is_written(
    api: tuple[httpx.AsyncClient, SqliteStore],
) -> None:
    client, store = api
    big = "x" * ((1 << 20) + 1)  # the default limit is 1 MiB
    resp = await client.post("/jobs", json={"prompt": big, "body": "claude"})
    assert resp.status_code == 400
    assert resp.json()["code"] == "prompt_too_large"
    assert "max_prompt_bytes" in resp.json()["error"]
    await _nothing_written(store)


async def test_a_12_mb_body_is_refused_unread(api: tuple[httpx.AsyncClient, SqliteStore]) -> None:
    client, store = api
    body = json.dumps({"prompt": "y" * (12 << 20)}).encode()
    resp = await client.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 400
    assert resp.json()["code"] == "prompt_too_large"
    await _nothing_written(store)


@pytest.mark.parametrize(
    "payload",
    [[1, 2], "just a string", {"prompt": 42}, {"prompt": ["a"]}, {"prompt": "ok", "body": 7}],
)
async def test_a_request_of_the_wrong_shape_is_a_400(
    api: tuple[httpx.AsyncClient, SqliteStore], payload: object
) -> None:
    client, store = api
    resp = await client.post("/jobs", json=payload)
    assert resp.status_code == 400, resp.text
    assert resp.json()["code"] == "bad_request"
    await _nothing_written(store)


def _chorus(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def _unwrapped(text: str) -> str:
    """The CLI's message with the console's line wrapping undone."""
    return text.replace("\n", "")


def test_the_cli_refuses_a_prompt_over_the_configured_limit(
    chorus_home: Path, tmp_path: Path
) -> None:
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text("[daemon]\nmax_prompt_bytes = 1000\n")
    done = _chorus("ask", "z" * 2000, "--body", "claude", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "the prompt is 2,000 bytes; the limit is 1,000" in _unwrapped(done.stderr)
    assert not (chorus_home / "chorus.db").exists()  # no daemon was started
    assert not (chorus_home / "run" / "daemon.pid").exists()


def test_a_config_toml_that_is_a_directory_is_a_clear_error(
    chorus_home: Path, tmp_path: Path
) -> None:
    (chorus_home / "config.toml").mkdir(parents=True)
    done = _chorus("ask", "hi", "--body", "claude", cwd=tmp_path)
    assert done.returncode == 2
    assert "config.toml: cannot be read (Is a directory)" in _unwrapped(done.stderr)
    assert "Traceback" not in done.stderr


def test_a_job_is_never_run_inside_chorus_home_except_its_workspace(chorus_home: Path) -> None:
    from chorus._errors import UserError
    from chorus.daemon._supervisor import _checked_dir

    (chorus_home / "run").mkdir(parents=True)
    (chorus_home / "workspace").mkdir()
    (chorus_home / "worktrees" / "repo-1" / "job").mkdir(parents=True)
    for inside in (chorus_home, chorus_home / "run"):
        with pytest.raises(UserError, match="inside CHORUS_HOME"):
            _checked_dir(str(inside))
    assert _checked_dir(str(chorus_home / "workspace")) == (chorus_home / "workspace").resolve()
    job_tree = chorus_home / "worktrees" / "repo-1" / "job"
    assert _checked_dir(str(job_tree)) == job_tree.resolve()
    assert _checked_dir(str(chorus_home.parent)) == chorus_home.parent.resolve()
