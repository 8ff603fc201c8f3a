"""Walk the README's "Everyday use" block on a fresh home, as a new user would: each
command exits 0, and again with ``--json`` prints JSON (real Claude through the daemon)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"
#: Commands whose --json output is JSON lines (a stream of events), not one document.
JSON_LINES = {"ask", "watch", "log"}


def everyday_commands() -> list[list[str]]:
    block = README.read_text().split("## Everyday use", 1)[1].split("```sh", 1)[1]
    lines = block.split("```", 1)[0].strip().splitlines()
    commands = [shlex.split(line, comments=True) for line in lines]
    assert all(c[0] == "./run" for c in commands)
    return [c[1:] for c in commands]


def _parse(name: str, out: str) -> object:
    if name in JSON_LINES:
        return [json.loads(line) for line in out.splitlines()]
    return json.loads(out)


def test_the_everyday_block_is_what_this_test_walks() -> None:
    names = [c[0] for c in everyday_commands()]
    assert names[:2] == ["ask", "task"]
    assert names[-1] == "stop"


@pytest.mark.timeout(600)  # two dozen CLI runs, each a process start
def test_walk_the_everyday_block(chorus: Chorus) -> None:
    chorus.server.script([text(f"answer {i}") for i in range(12)])
    ids: dict[str, str] = {}
    for command in everyday_commands():
        name = command[0]
        args = [_fill(arg, ids) for arg in command]
        plain = chorus.run(*args, timeout=180)
        assert plain.returncode == 0, (args, plain.stdout, plain.stderr)
        if name == "task":
            ids["JOB"] = plain.stdout.strip()
            ids["SESSION"] = chorus.client.job(ids["JOB"])["session_id"] or ""
        as_json = chorus.run(*args, "--json", timeout=180)
        assert as_json.returncode == 0, (args, as_json.stderr)
        assert _parse(name, as_json.stdout), (args, as_json.stdout)
    assert "JOB" in ids


def _fill(arg: str, ids: dict[str, str]) -> str:
    """Placeholders become real ids, given as prefixes (as `chorus jobs` prints them)."""
    return ids[arg][:10] if arg in ("JOB", "SESSION") else arg
