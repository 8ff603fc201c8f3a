"""A tiny scripted ACP agent for the fault cases the real agents cannot show on demand.

Run as ``python fake_acp_agent.py``. It answers ``initialize`` and ``session/new``
and acts on the first word of each prompt:

- ``hello``: one text chunk, ``end_turn`` with ACP ``usage``.
- ``read <path>`` / ``write <path>``: asks ``fs/read_text_file`` /
  ``fs/write_text_file`` and reports the client's answer as text.
- ``terminal``: asks ``terminal/create`` and reports the answer.
- ``permission``: asks ``session/request_permission`` and reports the outcome.
- ``slow``: streams chunks every 50 ms until ``session/cancel``, then ``cancelled``.
- ``hang``: never answers (ignores ``session/cancel`` too).
- ``crash``: one chunk, then exits with code 3.
- ``quota``: JSON-RPC error 429 (Gemini's daily-quota message).
- ``abort``: asks permission; a reject ends the turn ``cancelled`` (codex-acp's
  only reject option, "abort").
- ``edit <path>``: asks permission for an edit of ``path``, then (if allowed)
  writes it with ``fs/write_text_file`` and reports the answer.

Its start can be made slow, or fail, on demand (see ``_starting``).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from typing import Any

_out_lock = threading.Lock()
_replies: queue.Queue[dict[str, Any]] = queue.Queue()
_cancelled = threading.Event()
_next_id = iter(range(100, 1_000_000))


def send(msg: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
        sys.stdout.flush()


def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
    request_id = next(_next_id)
    send({"id": request_id, "method": method, "params": params})
    return _replies.get(timeout=10)


def say(session: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send({"method": "session/update", "params": {"sessionId": session, "update": update}})


def run_prompt(request_id: int, params: dict[str, Any]) -> None:
    session = params["sessionId"]
    words = params["prompt"][0]["text"].split(" ", 1)
    verb, arg = words[0], (words[1] if len(words) > 1 else "")
    result: dict[str, Any] = {"stopReason": "end_turn"}
    if verb == "hello":
        say(session, "hi")
        result["usage"] = {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7}
    elif verb in ("read", "write"):
        fs = {"path": arg, "sessionId": session}
        if verb == "write":
            fs["content"] = "written by fake\n"
        say(session, json.dumps(ask(f"fs/{verb}_text_file", fs)))
    elif verb == "terminal":
        say(session, json.dumps(ask("terminal/create", {"sessionId": session, "command": "ls"})))
    elif verb == "permission":
        say(session, json.dumps(ask("session/request_permission", permission_params(session))))
    elif verb == "slow":
        _cancelled.clear()
        while not _cancelled.wait(0.05):
            say(session, "tick ")
        result = {"stopReason": "cancelled"}
    elif verb == "hang":
        return
    elif verb == "crash":
        say(session, "about to crash")
        sys.stdout.flush()
        time.sleep(0.1)
        os._exit(3)  # from a thread: sys.exit would end only the thread
    elif verb == "abort":
        answer = ask("session/request_permission", permission_params(session))
        if answer["result"]["outcome"].get("optionId") == "no":
            result = {"stopReason": "cancelled"}
    elif verb == "edit":
        edit(session, arg)
    elif verb == "quota":
        error = {"code": 429, "message": "You have exhausted your daily quota on this model."}
        send({"id": request_id, "error": error})
        return
    send({"id": request_id, "result": result})


def edit(session: str, path: str) -> None:
    params = permission_params(session)
    params["toolCall"] = {
        "toolCallId": "call-2",
        "title": f"Edit {path}",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": path}],
        "rawInput": {"file_path": path},
    }
    answer = ask("session/request_permission", params)
    if answer["result"]["outcome"].get("optionId") in ("yes", "yes-always"):
        fs = {"path": path, "sessionId": session, "content": "edited by fake\n"}
        say(session, json.dumps(ask("fs/write_text_file", fs)))


def permission_params(session: str) -> dict[str, Any]:
    return {
        "sessionId": session,
        "options": [
            {"optionId": "yes-always", "name": "Always", "kind": "allow_always"},
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"},
        ],
        "toolCall": {
            "toolCallId": "call-1",
            "title": "rm -rf build",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": "rm -rf build"},
        },
    }


def _starting(method: str) -> None:
    """The start's fault knobs: ``FAKE_SLOW=<method>:<seconds>`` waits that long before
    answering ``method`` (a loaded machine); ``FAKE_DIE_AT=<method>`` says why on
    stderr and exits 3 instead; ``FAKE_STARTS=<file>`` gets a line per start."""
    if method == "initialize" and os.environ.get("FAKE_STARTS"):
        with open(os.environ["FAKE_STARTS"], "a") as starts:
            starts.write(f"{os.getpid()}\n")
    if os.environ.get("FAKE_DIE_AT") == method:
        sys.stderr.write(f"fake agent: cannot answer {method}\n")
        sys.stderr.flush()
        sys.exit(3)
    slow, _, seconds = os.environ.get("FAKE_SLOW", "").partition(":")
    if slow == method:
        time.sleep(float(seconds))


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method = msg.get("method")
        if method in ("initialize", "session/new"):
            _starting(method)
        if method is None:
            _replies.put(msg)
        elif method == "initialize":
            caps = {"loadSession": False}
            info = {"name": "fake-acp", "version": "9.9"}
            send(
                {
                    "id": msg["id"],
                    "result": {"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": info},
                }
            )
        elif method == "session/new" and os.environ.get("FAKE_NEW_FAILS"):
            sys.stderr.write("[DEBUG] starting\n" + os.environ["FAKE_NEW_FAILS"] + "\n")
            sys.stderr.flush()
            time.sleep(0.3)  # as claude-code-acp: its CLI's complaint comes well before
            error = {"code": -32603, "message": "Internal error"}
            send({"id": msg["id"], "error": error})
        elif method == "session/new":
            ids = os.environ.get("FAKE_MODES", "ask,auto").split(",")
            modes = {
                "currentModeId": ids[0],
                "availableModes": [{"id": i, "name": i.title()} for i in ids],
            }
            send({"id": msg["id"], "result": {"sessionId": "fake-session", "modes": modes}})
        elif method == "session/set_mode":
            send({"id": msg["id"], "result": {}})
        elif method == "session/cancel":
            _cancelled.set()
        elif method == "session/prompt":
            threading.Thread(
                target=run_prompt, args=(msg["id"], msg["params"]), daemon=True
            ).start()
        else:
            send({"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
