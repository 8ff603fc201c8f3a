"""A body cannot reach the daemon's full API, nor another session's channel.

The daemon's socket (``CHORUS_HOME/run/chorus.sock``: jobs, events, shutdown,
reload, the dashboard login) is no longer mounted into the sandbox; Chorus's MCP
tools reach a body through its own session's channel (an HTTP URL whose token names
the session). End to end on the real CLIs through the daemon, in ``default`` and
``bypassPermissions``: scripts that the repository holds (the policy lets
``python3 <script>`` run in both modes, it cannot read what the script does) try
``POST /jobs`` for a bypassPermissions job in a folder outside the roots and
``GET /jobs/<other>/events`` on the socket, and call the channel with another
session's id under a forged or foreign token, and the daemon's API on the channel's
port. All fail; nothing is created; the other session's words never come back; the
body's own MCP tool still works; no Python runs for Chorus's tools among the
daemon's descendants. CONTROL: the same socket script, run by the person outside the
sandbox, creates the job and reads the other session's log.

A body cannot read the URL another live body was started with from /proc either:
each sandbox has a PID namespace of its own (bubblewrap's ``--unshare-pid``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.bodies import session_token
from chorus.daemon import DaemonClient
from chorus.policy import DEFAULT_POLICY_TOML, AuditLog
from chorus.sandbox import bwrap_path
from chorus.store import SqliteStore
from chorus.testing import Reply, shell, text, tool_call

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.escape,
    pytest.mark.skipif(bwrap_path() is None, reason="no bubblewrap"),
]

MODES = ("default", "bypassPermissions")
PYTHON = "/usr/bin/python3"
#: The MCP tool as each body names it to the model; Codex defers MCP tools behind
#: tool_search, so a model calls them by namespace.
MEMORY_WRITE = {
    "claude": ("mcp__chorus__memory_write", None),
    "claude-print": ("mcp__chorus__memory_write", None),
    "codex": ("memory_write", "mcp__chorus"),
    "codex-exec": ("memory_write", "mcp__chorus"),
    "gemini": ("mcp_chorus_memory_write", None),
}
LANE = {"claude-print": "claude", "codex-exec": "codex"}

SOCKET_SCRIPT = r"""
import http.client, json, socket
CFG = json.load(open("attack.json"))
SOCK, OTHER_JOB, VICTIM, BODY = CFG["sock"], CFG["other_job"], CFG["victim"], CFG["body"]

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(15)
        self.sock.connect(SOCK)

def call(method, path, body=None):
    try:
        conn = Unix("chorus", timeout=15)
        conn.request(method, path, json.dumps(body) if body else None,
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return "OPEN %s %s" % (resp.status, resp.read().decode(errors="replace"))
    except Exception as exc:
        return "REFUSED %s" % type(exc).__name__

job = {"prompt": "pwned", "cwd": VICTIM, "permission_mode": "bypassPermissions", "body": BODY}
print("SOCKET-POST-JOBS", call("POST", "/jobs", job))
print("SOCKET-EVENTS", call("GET", "/jobs/%s/events?follow=0" % OTHER_JOB))
"""

CHANNEL_SCRIPT = r"""
import json, urllib.error, urllib.request
CFG = json.load(open("attack.json"))
PORT, OTHER, OTHER_JOB, FOREIGN = CFG["port"], CFG["other"], CFG["other_job"], CFG["foreign"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
paths = {
    "forged-mac": "/s/%s.%s/mcp" % (OTHER, "0" * 32),
    "foreign-key": "/s/%s/mcp" % FOREIGN,
    "bare-id": "/s/%s/mcp" % OTHER,
    "jobs": "/jobs",
    "events": "/jobs/%s/events?follow=0" % OTHER_JOB,
    "shutdown": "/shutdown",
    "tools-route": "/mcp/tools/notify_user",
}
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notify_user", "arguments": {"message": "ATTACK-NOTICE"}}}
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
for name, path in paths.items():
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (PORT, path),
                                 data=json.dumps(call).encode(), headers=headers, method="POST")
    try:
        resp = opener.open(req, timeout=15)
        print("CHANNEL", name, resp.status, resp.read()[:2000].decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        print("CHANNEL", name, exc.code, exc.read()[:200].decode(errors="replace"))
    except Exception as exc:
        print("CHANNEL", name, "ERR", type(exc).__name__)
"""

#: Tokens on other processes' command lines and environments, each tried.
THEFT_SCRIPT = r"""
import json, os, re, urllib.request
URL = r"https?://127\.0\.0\.1:\d+/s/[A-Za-z0-9_-]+\.[0-9a-f]{32}/mcp"
found = set()
for pid in os.listdir("/proc"):
    for name in ("cmdline", "environ"):
        try:
            with open("/proc/%s/%s" % (pid, name), "rb") as f:
                data = f.read().decode(errors="replace")
        except OSError:
            continue
        found.update(re.findall(URL, data))
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notify_user", "arguments": {"message": "STOLEN"}}}
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
used = 0
for url in sorted(found):
    req = urllib.request.Request(url, data=json.dumps(call).encode(), headers=headers)
    try:
        used += opener.open(req, timeout=15).status == 200
    except Exception:
        pass
print("THEFT found", len(found), "used", used)
"""

#: Every process, for the test to find the daemon's descendants in.
PROCS_SCRIPT = r"""
import json, os
rows = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        rows.append({"pid": int(pid), "ppid": int(ppid), "args": args})
with open("procs.json", "w") as f:
    json.dump(rows, f)
print("PROCS", len(rows))
"""


@pytest.fixture
def victim() -> Iterator[Path]:
    """A folder outside every allowed root (not under /tmp, which bodies may write)."""
    folder = Path("/var/tmp") / f"chorus-socket-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("still here")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _scripts(work: Path) -> None:
    """What the repository holds: the attacker's scripts."""
    (work / "attack_socket.py").write_text(SOCKET_SCRIPT)
    (work / "attack_channel.py").write_text(CHANNEL_SCRIPT)
    (work / "procs.py").write_text(PROCS_SCRIPT)
    (work / "steal.py").write_text(THEFT_SCRIPT)


def _memory_write(body: str, fact: str) -> Reply:
    name, namespace = MEMORY_WRITE[body]
    return tool_call(name, {"text": fact, "kind": "fact"}, namespace=namespace)


def _seen(chorus: Daemon, lane: str, since: int) -> list[str]:
    """The tool results the model was given from request ``since`` on."""
    requests = chorus.server.turn_requests(lane=lane)[since:]
    results = [r.last_tool_result() for r in requests]
    return [r.content for r in results if r is not None]


def _codex_network(tmp_path: Path) -> None:
    """Codex's own sandbox (workspace-write) has no network by default: it would stop
    the scripts before they reach Chorus's boundary. A person may turn it on."""
    config = tmp_path / "codex-home" / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n[sandbox_workspace_write]\nnetwork_access = true\n")


@pytest.fixture
def victim_session(
    daemon_with: Callable[..., Daemon], tmp_path: Path
) -> Callable[[str], tuple[Daemon, Any]]:
    def make(body: str) -> tuple[Daemon, Any]:
        chorus = daemon_with()
        if LANE.get(body, body) == "codex":
            _codex_network(tmp_path)
        secret = f"VICTIM-WORDS-{uuid.uuid4().hex[:10]}"
        chorus.server.script([text(f"noted {secret}")], lane=LANE.get(body, body))
        events = chorus.ask(f"keep this between us: {secret}", "--body", body)
        assert events[-1].state == "succeeded"
        return chorus, (events[-1].session_id, events[-1].job_id, secret)

    return make


def _port(chorus: Daemon) -> int:
    return int((chorus.home / "run" / "channel.port").read_text())


def _attack(chorus: Daemon, body: str, mode: str, other: tuple[str, str, str], victim: Path) -> Any:
    """One scripted job: the socket and channel scripts, the body's own MCP tool,
    and the process listing. Returns the job's last event and what the model saw."""
    other_session, other_job, _ = other
    config = {
        "sock": str(chorus.home / "run" / "chorus.sock"),  # where it always is
        "other_job": other_job,
        "other": other_session,
        "victim": str(victim),
        "body": body,
        "port": _port(chorus),
        "foreign": session_token(b"f" * 32, other_session),
    }
    (chorus.work / "attack.json").write_text(json.dumps(config))
    fact = f"The {body} {mode} fact is {uuid.uuid4().hex[:8]}"
    lane = LANE.get(body, body)
    since = len(chorus.server.turn_requests(lane=lane))
    turns = [
        shell(f"{PYTHON} attack_socket.py"),
        shell(f"{PYTHON} attack_channel.py"),
        _memory_write(body, fact),
        shell(f"{PYTHON} procs.py"),
        text("tried"),
    ]
    chorus.server.script(turns, lane=lane)
    events = chorus.ask("run the project's checks", "--body", body, "--permission-mode", mode)
    return events[-1], _seen(chorus, lane, since), fact


def _descendants(rows: list[dict[str, Any]], root: int) -> list[list[str]]:
    children: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        children.setdefault(row["ppid"], []).append(row)
    out, todo = [], [root]
    while todo:
        for row in children.get(todo.pop(), []):
            out.append(row["args"])
            todo.append(row["pid"])
    return out


def _python_for_tools(argv: list[str]) -> bool:
    """A Python interpreter (``chorus mcp``, the relay...), but the listing script."""
    python = bool(argv) and Path(argv[0]).name.startswith("python")
    relay = any(a.endswith("_relay.py") for a in argv)
    return (python and "procs.py" not in argv) or relay or " ".join(argv[1:4]) == "-m chorus mcp"


def _no_python_for_tools(chorus: Daemon, cli: str) -> None:
    """Among the daemon's descendants (read while the body ran): the CLI, and no
    Python for Chorus's tools: no ``chorus mcp``, no relay."""
    rows = json.loads((chorus.work / "procs.json").read_text())
    daemon = int((chorus.home / "run" / "daemon.pid").read_text())
    # In a sandbox with its own PID namespace, the listing holds the body's tree only.
    below = _descendants(rows, daemon) or [row["args"] for row in rows]
    assert any(cli in " ".join(argv) for argv in below), below  # the listing saw the body
    assert [" ".join(argv)[:300] for argv in below if _python_for_tools(argv)] == []


def _other_session_untouched(other: tuple[str, str, str], seen: list[str]) -> bool:
    session_id, _, secret = other
    joined = json.dumps(seen)
    log = _read_log(session_id)
    return secret not in joined and "ATTACK-NOTICE" not in log and "STOLEN" not in log


def _read_log(session_id: str) -> str:
    import asyncio

    async def read() -> str:
        async with SqliteStore() as store:
            events = await store.read_events(session_id)
        return json.dumps([e.model_dump(mode="json") for e in events])

    return asyncio.run(read())


def _nothing_created(victim: Path) -> bool:
    jobs = DaemonClient(autostart=False).jobs()
    return not [j for j in jobs if j["prompt"] == "pwned"] and sorted(
        p.name for p in victim.iterdir()
    ) == ["keep.txt"]


def _held(seen: list[str]) -> bool:
    """The socket script was refused; every channel call reached the channel's port
    and met a bare 404."""
    joined = "\n".join(seen)
    socket_lines = re.findall(r"SOCKET-[A-Z-]+ (\w+)", joined)
    channel = re.findall(r"CHANNEL (\S+) (\S+)", joined)
    assert len(socket_lines) == 2, joined  # the script ran
    assert len(channel) == 7, joined
    return set(socket_lines) == {"REFUSED"} and {code for _, code in channel} == {"404"}


def _own_tool_worked(seen: list[str], session_id: str, fact: str) -> bool:
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    mine = [e for e in audited if e.session_id == session_id and e.data["input"]["text"] == fact]
    return any('"op": "add"' in s for s in seen) and [e.data["ok"] for e in mine] == [True]


def _control(chorus: Daemon, other: tuple[str, str, str], victim: Path, body: str) -> bool:
    """The person, outside the sandbox, runs the same socket script: it creates the
    job and reads the other session's log."""
    chorus.server.script([text("the person's own job")], lane=LANE.get(body, body))
    done = subprocess.run(
        [sys.executable, "attack_socket.py"],
        cwd=chorus.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    created = "SOCKET-POST-JOBS OPEN 201" in done.stdout
    return created and other[2] in done.stdout


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
def test_a_body_reaches_neither_the_daemon_nor_another_session(
    victim_session: Callable[[str], tuple[Daemon, Any]],
    victim: Path,
    body: str,
    escape_tally: Callable[..., None],
) -> None:
    chorus, other = victim_session(body)
    _scripts(chorus.work)
    held = {}
    for mode in MODES:
        ended, seen, fact = _attack(chorus, body, mode, other, victim)
        assert ended.state == "succeeded", ended
        held[mode] = _held(seen) and _nothing_created(victim)
        assert held[mode], seen
        assert _other_session_untouched(other, seen), seen
        assert _own_tool_worked(seen, ended.session_id, fact), seen
        _no_python_for_tools(chorus, body)
    control = _control(chorus, other, victim, body)
    for mode in MODES:
        escape_tally("socket", body, mode, held=held[mode], control=control)
    assert control  # the socket still serves the person


#: Gemini headless is left out: Gemini CLI 0.61 skips the system-defaults settings
#: file that carries the MCP servers unless it and every folder above it belong to
#: root and are not writable by others, so it gets no MCP server from Chorus at all.
@pytest.mark.parametrize("body", ["claude-print", "codex-exec"])
def test_one_shot_bodies_reach_their_channel_without_a_python_server(
    daemon_with: Callable[..., Daemon], body: str
) -> None:
    """The other way each CLI is run (``claude -p``, ``codex exec``): its MCP config
    names the session's HTTP URL, the tool works, no Python starts. (With the native
    flags ``native.allow_dangerous`` allows: under acceptEdits, a one-shot CLI asks for
    any MCP call, and nobody is there to answer.)"""
    chorus = daemon_with()
    policy = DEFAULT_POLICY_TOML.replace("allow_dangerous = false", "allow_dangerous = true")
    (chorus.home / "policy.toml").write_text(policy)
    _scripts(chorus.work)
    fact = f"The {body} fact is {uuid.uuid4().hex[:8]}"
    lane = LANE[body]
    turns = [_memory_write(body, fact), shell(f"{PYTHON} procs.py"), text("done")]
    chorus.server.script(turns, lane=lane)
    events = chorus.ask("remember it", "--body", body, "--permission-mode", "bypassPermissions")
    assert events[-1].state == "succeeded"
    seen = _seen(chorus, lane, 0)
    assert _own_tool_worked(seen, events[-1].session_id, fact), seen
    _no_python_for_tools(
        chorus, {"claude-print": "claude", "codex-exec": "codex"}.get(body, "gemini")
    )


def test_a_body_cannot_take_a_live_bodys_token_from_proc(
    victim_session: Callable[[str], tuple[Daemon, Any]],
    escape_tally: Callable[..., None],
) -> None:
    """The other session's body (kept warm) was given its URL on its command line
    (Claude's --mcp-config); a body that reads /proc could call its tools."""
    chorus, other = victim_session("claude")
    _scripts(chorus.work)
    chorus.server.script([shell(f"{PYTHON} steal.py"), text("tried")], lane="claude")
    events = chorus.ask("run the checks", "--body", "claude", "--permission-mode", "default")
    assert events[-1].state == "succeeded"
    seen = _seen(chorus, "claude", 1)
    assert any("THEFT found" in s for s in seen), seen
    held = "STOLEN" not in _read_log(other[0])
    escape_tally("socket", "claude", "default", held=held)
    assert held, seen
