"""A remote brain in ~80 lines: drive a Chorus body over UCP v1 with plain ``websockets``.

    uv run python examples/brain_client.py "create hello.txt" --body claude --cwd /tmp/work

It connects to the gateway's TCP listener (``chorus gateway status`` shows the
URL; the token is in ``CHORUS_HOME/run/gateway.token``, or ``chorus gateway
token``), opens a session with ``initialize``, sends one user message, prints
the events as they stream, and exits when the turn ends (0: completed).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

_ids = itertools.count(1)


async def request(ws: ClientConnection, subtype: str, **fields: Any) -> dict[str, Any]:
    """Send one control_request and wait for its control_response (events are printed)."""
    request_id = f"brain-{next(_ids)}"
    frame = {
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": subtype, **fields},
    }
    await ws.send(json.dumps(frame))
    while True:
        message = json.loads(await ws.recv())
        if message["type"] == "event":
            show(message["event"])
        elif (
            message["type"] == "control_response"
            and message["response"]["request_id"] == request_id
        ):
            answer: dict[str, Any] = message["response"]
            if answer["subtype"] == "error":
                raise SystemExit(f"{subtype} failed: [{answer['error_code']}] {answer['error']}")
            return dict(answer.get("response", {}))


def show(event: dict[str, Any]) -> None:
    kind = event["type"]
    if kind == "text_delta":
        print(event["text"], end="", flush=True)
    elif kind in ("tool_call", "tool_result", "turn_failed", "compatibility_warning", "notice"):
        print(f"\n[{event['seq']}] {kind}: {json.dumps(event, default=str)[:200]}")


async def main(args: argparse.Namespace) -> int:
    token = args.token or default_token()
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(args.url, additional_headers=headers, proxy=None) as ws:
        info = await request(
            ws, "initialize", body=args.body, cwd=args.cwd, permission_mode=args.mode
        )
        print(f"session {info['session_id']} on {info['body']} (model {info['model']})")
        await ws.send(
            json.dumps({"type": "user", "message": {"role": "user", "content": args.prompt}})
        )
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "keep_alive":  # echo it: a silent brain is closed as idle
                await ws.send('{"type": "keep_alive"}')
            if message["type"] != "event":
                continue  # keep_alive, or an error answer to a refused frame
            event = message["event"]
            show(event)
            if event["type"] in ("turn_completed", "turn_failed", "session_ended"):
                print(f"\n{event['type']} (last seq {message['seq']})")
                return 0 if event["type"] == "turn_completed" else 1


def default_token() -> str:
    home = Path(os.environ.get("CHORUS_HOME", Path.home() / ".chorus")).expanduser()
    return (home / "run" / "gateway.token").read_text().strip()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Drive a Chorus body over the UCP gateway.")
    parser.add_argument("prompt")
    parser.add_argument("--url", default="ws://127.0.0.1:7719/ucp")
    parser.add_argument("--token", default=os.environ.get("CHORUS_GATEWAY_TOKEN"))
    parser.add_argument("--body", default="claude")
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("--mode", default="default", help="permission mode")
    sys.exit(asyncio.run(main(parser.parse_args())))
