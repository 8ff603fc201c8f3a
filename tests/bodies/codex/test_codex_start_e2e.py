"""The start of a Codex app-server body on a loaded machine, with the real ``codex``: each
step (``initialize``, ``thread/start``) waits while app-server runs, up to the start's
deadline; a start stuck past it is given up and tried once more, then fails naming the
step. The stuck first try is a fake (a real CLI cannot be made slow on demand): a
wrapper that, the first time only, sleeps instead of running Codex."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chorus import BodyTimeoutError
from chorus.bodies import BodyOptions
from chorus.bodies.codex import CodexBody
from chorus.events import Event, Notice, TurnCompleted
from chorus.testing import ModelServer, OfflineCli, Scenario, text
from tests._procs import alive

pytestmark = pytest.mark.e2e


def _stuck_first(cli: OfflineCli, folder: Path, *, every_time: bool = False) -> Path:
    """A ``codex`` that hangs (pid in ``folder/stuck``) on its first start, or on all."""
    marker, stuck, fake = folder / "started-once", folder / "stuck", folder / "slow-codex"
    hang = f'echo $$ >> "{stuck}"; exec sleep 600'
    once = hang if every_time else f'[ -e "{marker}" ] || {{ touch "{marker}"; {hang}; }}'
    fake.write_text(f'#!/bin/sh\n{once}\nexec "{cli.executable}" "$@"\n')
    fake.chmod(0o755)
    return fake


async def test_a_start_stuck_once_is_tried_again_and_the_body_works(
    offline_cli: Callable[..., OfflineCli], model_server: ModelServer, tmp_path: Path
) -> None:
    cli = offline_cli("codex")
    fake = _stuck_first(cli, tmp_path)
    model_server.script(Scenario.of(text("started on the second try")))
    options = BodyOptions(
        cwd=cli.cwd,
        env=cli.env,
        executable=fake,
        permission_mode="bypassPermissions",
        start_timeout=4.0,
    )
    async with CodexBody(options) as body:
        events: list[Event] = [e async for e in body.turn("hello")]
    warnings = [e.message for e in events if isinstance(e, Notice) and e.kind == "warning"]
    assert any(
        "start step initialize got no answer within 4s while app-server ran" in w
        and "starting it once more" in w
        for w in warnings
    ), warnings
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].result == "started on the second try"
    stuck = [int(p) for p in (tmp_path / "stuck").read_text().split()]
    assert len(stuck) == 1
    assert not alive(stuck[0])  # the stuck try was ended, not left behind


async def test_a_start_stuck_every_time_fails_after_one_more_try_naming_the_step(
    offline_cli: Callable[..., OfflineCli], tmp_path: Path
) -> None:
    cli = offline_cli("codex")
    fake = _stuck_first(cli, tmp_path, every_time=True)
    options = BodyOptions(cwd=cli.cwd, env=cli.env, executable=fake, start_timeout=2.0)
    body = CodexBody(options)
    began = time.monotonic()
    with pytest.raises(BodyTimeoutError, match="start step initialize got no answer within 2s"):
        await body.start()
    assert time.monotonic() - began < 20
    stuck = [int(p) for p in (tmp_path / "stuck").read_text().split()]
    assert len(stuck) == 2  # one try more, not more
    assert not any(alive(pid) for pid in stuck)
