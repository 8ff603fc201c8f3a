"""A fake ``claude`` speaking just enough stream-json to drive fault cases.

The behaviour on a user message comes from ``FAKE_CLAUDE_MODE``:

- ``echo``: a normal turn answering ``echo: <prompt>``.
- ``garbage``: non-JSON and unknown lines first, then a normal turn.
- ``hang``: starts the turn, then ignores every later line (interrupts too) and
  never exits on stdin EOF; with ``FAKE_CLAUDE_IGNORE_TERM=1`` it also ignores SIGTERM.
- ``crash``: starts the turn, writes to stderr and exits 3.
- ``cancel``: asks ``can_use_tool``, withdraws it with ``control_cancel_request``,
  then ends the turn.
- ``hook``: sends a ``hook_callback`` request, waits for its answer, then ends the
  turn with the answer's subtype as the result text.
- ``mcp``: sends the ``mcp_message`` requests of :data:`MCP_ASKS` one at a time,
  each after the last one's answer, then ends the turn with the answers (JSON) as
  the result text.

``FAKE_CLAUDE_NO_INIT=1`` leaves ``initialize`` unanswered. Every stdin line is
appended to ``FAKE_CLAUDE_LOG`` when set.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

SESSION = "fa4e0000-0000-4000-8000-000000000001"
MODE = os.environ.get("FAKE_CLAUDE_MODE", "echo")


def out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log(line: str) -> None:
    path = os.environ.get("FAKE_CLAUDE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line if line.endswith("\n") else line + "\n")


def answer(request_id: str, body: dict[str, Any] | None = None) -> None:
    response = {"subtype": "success", "request_id": request_id, "response": body or {}}
    out({"type": "control_response", "response": response})


def init() -> None:
    out(
        {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "model": "fake-model",
            "cwd": os.getcwd(),
            "tools": ["Bash"],
            "permissionMode": "default",
            "claude_code_version": "0.0.0-fake",
        }
    )


def text(value: str) -> None:
    message = {"id": "msg_fake", "role": "assistant", "content": [{"type": "text", "text": value}]}
    out({"type": "assistant", "message": message, "session_id": SESSION})


def result(value: str, *, interrupted: bool = False) -> None:
    line: dict[str, Any] = {
        "type": "result",
        "session_id": SESSION,
        "num_turns": 1,
        "total_cost_usd": 0.0,
        "duration_ms": 1,
        "result": value,
        "subtype": "success",
        "is_error": False,
    }
    if interrupted:
        line.update(
            subtype="error_during_execution",
            is_error=True,
            terminal_reason="aborted_streaming",
            result="",
        )
    out(line)


def read() -> dict[str, Any] | None:
    raw = sys.stdin.readline()
    if not raw:
        return None
    log(raw)
    msg: dict[str, Any] = json.loads(raw)
    return msg


#: (server name, message) of each ``mcp_message`` the ``mcp`` mode sends.
MCP_ASKS: list[tuple[str, Any]] = [
    ("chorus", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ("chorus", "not an object"),
    ("elsewhere", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ("chorus", {"jsonrpc": "2.0", "id": 2, "method": "boom"}),
    ("chorus", {"jsonrpc": "2.0", "id": 3, "method": "huge"}),
    ("chorus", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
]


def ask_mcp(n: int, server: str, message: Any) -> dict[str, Any]:
    request_id = f"mcp-{n}"
    request = {"subtype": "mcp_message", "server_name": server, "message": message}
    out({"type": "control_request", "request_id": request_id, "request": request})
    while (reply := read()) is not None:
        response = reply.get("response", {})
        if reply.get("type") == "control_response" and response.get("request_id") == request_id:
            return dict(response)
    return {}


def hang_forever() -> None:
    if os.environ.get("FAKE_CLAUDE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while read() is not None:
        pass
    while True:
        time.sleep(1)


def turn(prompt: str) -> None:
    init()
    if MODE == "garbage":
        for junk in (
            "this is not json",
            "[1, 2, 3]",
            '{"type": "brand_new_type", "x": 1}',
            '{"type": "assistant"}',
            '{"type": "system", "subtype": "future_thing"}',
        ):
            sys.stdout.write(junk + "\n")
        sys.stdout.flush()
    if MODE == "hang":
        out(
            {
                "type": "stream_event",
                "session_id": SESSION,
                "event": {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "thinking about it"},
                },
            }
        )
        hang_forever()
    if MODE == "crash":
        sys.stderr.write("boom: fake crash\n")
        sys.stderr.flush()
        sys.exit(3)
    if MODE == "cancel":
        out(
            {
                "type": "control_request",
                "request_id": "perm-1",
                "request": {
                    "subtype": "can_use_tool",
                    "tool_name": "Bash",
                    "input": {"command": "true"},
                    "tool_use_id": "toolu_fake",
                },
            }
        )
        time.sleep(0.3)
        out({"type": "control_cancel_request", "request_id": "perm-1"})
        time.sleep(0.3)
    if MODE == "mcp":
        result(json.dumps([ask_mcp(n, *ask) for n, ask in enumerate(MCP_ASKS)]))
        return
    if MODE == "hook":
        out(
            {
                "type": "control_request",
                "request_id": "hook-1",
                "request": {"subtype": "hook_callback", "callback_id": "cb"},
            }
        )
        reply = read() or {}
        result(str(reply.get("response", {}).get("subtype")))
        return
    text(f"echo: {prompt}")
    result(f"echo: {prompt}")


def control(msg: dict[str, Any]) -> None:
    request = msg["request"]
    if request["subtype"] == "initialize":
        if os.environ.get("FAKE_CLAUDE_NO_INIT") != "1":
            answer(msg["request_id"], {"pid": os.getpid()})
    elif request["subtype"] == "interrupt":
        answer(msg["request_id"], {"still_queued": []})


def main() -> None:
    while (msg := read()) is not None:
        if msg.get("type") == "control_request":
            control(msg)
        elif msg.get("type") == "user":
            turn(str(msg["message"]["content"]))


if __name__ == "__main__":
    main()
