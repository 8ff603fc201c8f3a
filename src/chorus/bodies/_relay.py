"""A stdio MCP server that relays to a streamable-HTTP one, for an agent that takes
only stdio servers: ``python -S -I _relay.py <url> [<header>: <value> ...]``.

Standard library only and run without ``site`` (a few milliseconds to start, where
Chorus's own ``chorus mcp`` with the MCP SDK takes a second): each JSON-RPC line on
stdin is POSTed to the URL, and each message of the answer (JSON or an SSE stream)
is written back as a line. It reaches only that URL: for a body, its own session's
channel.
"""

import http.client
import json
import sys
import threading
import urllib.parse

_ACCEPT = "application/json, text/event-stream"


class Relay:
    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = urllib.parse.urlsplit(url)
        self.headers = {**headers, "Accept": _ACCEPT, "Content-Type": "application/json"}
        self.out = threading.Lock()

    def forward(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        rid = message.get("id") if isinstance(message, dict) else None
        try:
            self.post(line.encode(), rid)
        except (OSError, http.client.HTTPException) as exc:
            self.fail(rid, f"Chorus's channel did not answer ({exc})")

    def post(self, body: bytes, rid: object) -> None:
        secure = self.url.scheme == "https"
        conn_class = http.client.HTTPSConnection if secure else http.client.HTTPConnection
        conn = conn_class(self.url.netloc, timeout=600)
        path = self.url.path + (f"?{self.url.query}" if self.url.query else "")
        try:
            conn.request("POST", path, body, self.headers)
            resp = conn.getresponse()
            self.learn(resp)
            self.answer(resp, rid)
        finally:
            conn.close()

    def learn(self, resp: http.client.HTTPResponse) -> None:
        session = resp.getheader("mcp-session-id")
        if session:
            self.headers["Mcp-Session-Id"] = session

    def answer(self, resp: http.client.HTTPResponse, rid: object) -> None:
        if resp.status >= 400:
            resp.read()
            self.fail(rid, f"Chorus's channel answered HTTP {resp.status}")
            return
        kind = resp.getheader("content-type") or ""
        if kind.startswith("text/event-stream"):
            for raw in resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("data:"):
                    self.emit(line[5:].strip())
            return
        text = resp.read().decode().strip()
        if text:
            self.emit(text)

    def emit(self, text: str) -> None:
        try:
            data = json.loads(text)
        except ValueError:
            return
        for message in data if isinstance(data, list) else [data]:
            self.version(message)
            self.write(message)

    def version(self, message: object) -> None:
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.headers["MCP-Protocol-Version"] = result["protocolVersion"]

    def fail(self, rid: object, text: str) -> None:
        if rid is not None:
            self.write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": text}})

    def write(self, message: object) -> None:
        with self.out:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()


def _headers(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, _, value = pair.partition(":")
        out[name.strip()] = value.strip()
    return out


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: _relay.py <url> [<header>: <value> ...]\n")
        return 2
    relay = Relay(argv[0], _headers(argv[1:]))
    threads = []
    for line in sys.stdin:
        if line.strip():
            thread = threading.Thread(target=relay.forward, args=(line,), daemon=True)
            thread.start()
            threads.append(thread)
    for thread in threads:
        thread.join(30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
