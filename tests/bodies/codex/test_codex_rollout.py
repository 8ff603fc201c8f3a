"""Following Codex's rollout for ``codex exec``: recorded order, history skipped, and a
file the body could have swapped (a link, a hard link) read as nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chorus.bodies.codex import ExecCodec, RolloutTail, codex_home
from chorus.events import ToolCall, ToolResult

THREAD = "01a2188f-6f7b-7160-8771-d5554861eafe"
STARTED = json.dumps({"type": "thread.started", "thread_id": THREAD})


def _call(call_id: str, cmd: str) -> str:
    payload = {"type": "function_call", "name": "exec_command", "call_id": call_id,
               "arguments": json.dumps({"cmd": cmd})}  # fmt: skip
    return json.dumps({"type": "response_item", "payload": payload})


def _output(call_id: str, text: str) -> str:
    payload = {"type": "function_call_output", "call_id": call_id, "output": text}
    return json.dumps({"type": "response_item", "payload": payload})


NOISE = json.dumps({"type": "response_item", "payload": {"type": "message", "role": "user"}})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "codex-home"
    (folder / "sessions" / "2026" / "11" / "26").mkdir(parents=True)
    return folder


def rollout(home: Path) -> Path:
    return home / "sessions" / "2026" / "11" / "26" / f"rollout-2026-11-26T15-53-03-{THREAD}.jsonl"


def append(path: Path, *lines: str, end: str = "\n") -> None:
    with path.open("a") as file:
        file.write("\n".join(lines) + end)


def test_codex_home_is_the_variable_or_the_home_folder() -> None:
    assert codex_home({"CODEX_HOME": "/x/c", "HOME": "/h"}) == Path("/x/c")
    assert codex_home({"HOME": "/h"}) == Path("/h/.codex")
    assert codex_home({}) is None


def test_new_lines_are_tapped_before_the_stdout_line_and_fed_in_that_order(home: Path) -> None:
    append(rollout(home), _call("call_old", "echo history"), _output("call_old", "history"))
    tail, codec, recorded = RolloutTail(home), ExecCodec(), []
    codec.begin_run(model=None, permission_mode=None)
    tail.mark(THREAD)  # a resumed thread: what is there is history
    tap = tail.wrap(lambda stream, line: recorded.append(line))
    append(rollout(home), NOISE, _call("call_1", "cat secret"), _output("call_1", "denied"))
    tap("stdout", STARTED)
    assert recorded == [_call("call_1", "cat secret"), _output("call_1", "denied"), STARTED]
    events = [*tail.before(codec), *codec.receive_line(STARTED)]
    call, result = (e for e in events if isinstance(e, ToolCall | ToolResult))
    assert isinstance(call, ToolCall)
    assert (call.call_id, call.input) == ("call_1", {"command": "cat secret"})
    assert isinstance(result, ToolResult)
    assert result.output == "denied"


def test_a_new_thread_is_found_from_exec_stdout_and_a_half_line_waits(home: Path) -> None:
    tail, codec, recorded = RolloutTail(home), ExecCodec(), []
    codec.begin_run(model=None, permission_mode=None)
    tail.mark(None)
    tap = tail.wrap(lambda stream, line: recorded.append(line))
    append(rollout(home), _call("call_2", "ls"), _output("call_2", "a")[:20], end="")
    tap("stdout", STARTED)
    assert recorded == [_call("call_2", "ls"), STARTED]
    append(rollout(home), _output("call_2", "a")[20:])
    assert [type(e).__name__ for e in tail.rest(codec)] == ["ToolCall", "ToolResult"]
    assert recorded[-1] == _output("call_2", "a")


def _swapped_read(home: Path) -> list[str]:
    tail, recorded = RolloutTail(home), []
    tail.mark(None)
    tail.wrap(lambda stream, line: recorded.append(line))("stdout", STARTED)
    return recorded


def test_a_link_in_place_of_the_rollout_is_not_followed(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    append(elsewhere, _call("call_x", "cat ~/.ssh/id_rsa"))
    rollout(home).symlink_to(elsewhere)
    assert _swapped_read(home) == [STARTED]


def test_a_hard_link_or_a_linked_folder_is_not_read(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    append(elsewhere, _call("call_x", "secret"))
    os.link(elsewhere, rollout(home))
    assert _swapped_read(home) == [STARTED]
    rollout(home).unlink()
    day = rollout(home).parent
    day.rename(tmp_path / "day")
    append(tmp_path / "day" / rollout(home).name, _call("call_y", "secret"))
    day.symlink_to(tmp_path / "day")
    assert _swapped_read(home) == [STARTED]


def test_a_linked_codex_home_is_not_followed(home: Path, tmp_path: Path) -> None:
    append(rollout(home), _call("call_z", "ls"))
    link = tmp_path / "linked-home"
    link.symlink_to(home)
    assert _swapped_read(link) == [STARTED]
    assert _swapped_read(home) == [_call("call_z", "ls"), STARTED]


def test_a_thread_id_that_is_a_path_names_no_file(home: Path) -> None:
    (home / "sessions" / "rollout-x-..").mkdir()
    tail, recorded = RolloutTail(home), []
    tail.mark("../../../etc/passwd")
    tail.wrap(lambda stream, line: recorded.append(line))("stdout", "{}")
    assert recorded == ["{}"]
