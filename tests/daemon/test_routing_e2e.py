"""Routing you can see: a job the router placed says which body and why,
in its log, in ``ask``'s output (events, and a note on stderr when piped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.events import Routed
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e


def test_a_routed_job_records_its_class_and_reason(daemon_with: Callable[..., Daemon]) -> None:
    daemon = daemon_with()
    daemon.server.script([text("renamed")], lane="gemini")
    events = daemon.ask("Rename foo to bar in the config")
    routed = [e for e in events if isinstance(e, Routed)]
    assert len(routed) == 1
    (route,) = routed
    assert (route.to_body, route.kind, route.load, route.strategy) == (
        "gemini",
        "structured_execution",
        "token_light",
        "smart",
    )
    assert route.reason == (
        "first for structured_execution/token_light (order gemini > codex > claude)"
    )
    assert events[0] == route  # before the body says anything
    daemon.server.script([text("the summary")], lane="gemini")
    piped = daemon.run("ask", "Rename bar to baz")  # stdout is a pipe: the answer only
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "the summary\n"
    assert "routed to gemini: first for structured_execution/token_light" in piped.stderr
