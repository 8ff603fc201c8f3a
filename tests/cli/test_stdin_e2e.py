"""Piped input, huge prompts, bad UTF-8 and closed pipes through the real ``chorus``
CLI and daemon, with the real Claude Code CLI on the scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def _chorus(
    chorus: Chorus, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=120,
        env=os.environ.copy(),
        cwd=chorus.work,
    )


def test_piped_text_reaches_the_model_with_the_prompt(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([text("It was a marker.")])
    done = _chorus(
        chorus, "ask", "what was piped?", "--body", "claude", stdin=b"PIPED-MARKER-7731\n"
    )
    assert done.returncode == 0, done.stderr
    said = chorus.server.turn_requests()[0].last_user_text() or ""
    assert "what was piped?" in said
    assert "PIPED-MARKER-7731" in said


def test_dash_takes_the_prompt_from_stdin(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([text("ok")])
    done = _chorus(chorus, "ask", "-", "--body", "claude", stdin=b"the prompt itself\n")
    assert done.returncode == 0, done.stderr
    assert "the prompt itself" in (chorus.server.turn_requests()[0].last_user_text() or "")


def test_a_prompt_over_the_limit_exits_2_with_nothing_written(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.run("start")
    before = chorus.client.jobs()
    huge = b"x" * (3 << 20)
    done = _chorus(chorus, "ask", "-", "--body", "claude", stdin=huge)
    assert done.returncode == 2, done.stderr
    assert b"max_prompt_bytes" in done.stderr
    assert chorus.client.jobs() == before
    assert chorus.server.requests == []


def test_bad_utf8_in_the_prompt_is_exit_2_with_its_position(chorus: Chorus) -> None:
    done = _chorus(chorus, "ask", os.fsdecode(b"fix \xff this"), "--body", "claude")
    assert done.returncode == 2
    assert b"byte 4" in done.stderr
    assert b"Traceback" not in done.stderr


def test_a_closed_pipe_ends_quietly(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([text("one")] * 3)
    for n in range(3):
        assert _chorus(chorus, "task", f"job {n}", "--body", "claude").returncode == 0
    shell = f"{sys.executable} -m chorus jobs | head -1"
    done = subprocess.run(shell, shell=True, capture_output=True, timeout=60, cwd=chorus.work)
    assert done.stdout.startswith(b"job")
    assert done.stderr == b""
