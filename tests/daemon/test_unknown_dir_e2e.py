"""after a directory change Chorus cannot follow, the rest of the command
asks, end to end on the real Claude CLI (scripted model) in the default mode.

The policy's risk authority is ``advisory`` (elevated risk alone would be let
through), and an unanswered ask is denied after two seconds. The model runs
``cd "$(cat where.txt)" && touch ...``: harmless here (where.txt names a folder
inside the root) but Chorus cannot know that before it runs, so a person is
asked, nobody answers, and the file is never made. A ``cd`` Chorus can follow
runs as usual."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

POLICY = """version = 1
mode = "default"

[risk]
authority = "advisory"

[ask]
timeout_s = 2
default = "deny"
"""


def test_a_command_after_an_unknown_cd_is_asked_about(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with()
    (chorus.home / "policy.toml").write_text(POLICY)
    (chorus.work / "sub").mkdir()
    (chorus.work / "where.txt").write_text("sub\n")
    chorus.server.script(
        [
            shell('cd "$(cat where.txt)" && touch unknown.txt'),
            shell("cd sub && touch known.txt"),
            text("done"),
        ],
        lane="claude",
    )
    events = chorus.ask("make two files", "--body", "claude")
    assert events[-1].state == "succeeded"
    assert not (chorus.work / "sub" / "unknown.txt").exists()
    assert (chorus.work / "sub" / "known.txt").exists()
    results = [r.last_tool_result() for r in chorus.server.turn_requests(lane="claude")]
    told = json.dumps([r.content for r in results if r is not None])
    assert "known only at run time" in told
    assert "no answer came in time" in told
    audit = (chorus.home / "audit" / "audit.jsonl").read_text().splitlines()
    raised = [json.loads(line) for line in audit if '"flag_raised"' in line]
    assert len(raised) == 1
    assert "known only at run time" in raised[0]["data"]["reason"]
