"""``chorus-claude`` driven by the official ``claude-agent-sdk`` (``query()`` and
``ClaudeSDKClient``) with real Codex and Gemini bodies behind the daemon (offline)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from chorus.agents import find_agent
from chorus.events import CompatibilityWarning, Notice, ToolCall, TurnCompleted, TurnFailed
from chorus.fronts import ClaudeCodec, parse_argv
from chorus.fronts._claude_argv import UsageError
from chorus.policy import AuditLog
from chorus.testing import offline_env, shell, slow_text, text, tool_call

if TYPE_CHECKING:
    from conftest import FrontHome

pytestmark = pytest.mark.e2e

CHORUS_CLAUDE = str(Path(sys.executable).with_name("chorus-claude"))


def _options(home: FrontHome, body: str, **kw: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        cli_path=CHORUS_CLAUDE,
        cwd=str(home.work),
        extra_args={"chorus-body": body},
        **kw,
    )


async def _collect(prompt: str, options: ClaudeAgentOptions) -> list[Any]:
    return [message async for message in query(prompt=prompt, options=options)]


@pytest.mark.parametrize("body", ["codex", "gemini"])
async def test_query_runs_a_shell_tool(shared_front: FrontHome, body: str) -> None:
    shared_front.server.script([shell(f"echo from {body} > made.txt"), text("made it")])
    options = _options(shared_front, body, permission_mode="bypassPermissions")
    messages = await asyncio.wait_for(_collect("make made.txt", options), 180)
    assert (shared_front.work / "made.txt").read_text().strip() == f"from {body}"
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert init.data["claude_code_version"]
    session_id = init.data["session_id"]
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content]
    assert any(isinstance(b, ToolUseBlock) and "made.txt" in str(b.input) for b in uses)
    results = [b for m in messages if isinstance(m, UserMessage) for b in m.content]
    assert any(isinstance(b, ToolResultBlock) for b in results)
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert not done.is_error
    assert done.result == "made it"
    assert done.session_id == session_id
    events = await shared_front.log(session_id)
    assert {e.body for e in events if e.body} == {body}
    assert any(isinstance(e, ToolCall) and e.tool == "shell" for e in events)
    assert sum(isinstance(e, TurnCompleted) for e in events) == 1


async def test_client_multi_turn_set_model_and_interrupt_on_gemini(
    shared_front: FrontHome,
) -> None:
    shared_front.server.script(
        [
            text("first answer"),
            text("second answer"),
            slow_text("a b c d e f g h i j k l m n o p", chunks=40, delay=0.25),
            text("after the interrupt"),
        ]
    )
    options = _options(shared_front, "gemini", include_partial_messages=True)
    async with ClaudeSDKClient(options) as client:
        await client.query("one")
        first = [m async for m in client.receive_response()]
        assert isinstance(first[-1], ResultMessage)
        assert first[-1].result == "first answer"
        session_id = first[-1].session_id
        partials = [m for m in first if type(m).__name__ == "StreamEvent"]
        assert partials  # --include-partial-messages: stream_event frames

        await client.set_model("gemini-2.5-pro")
        await client.set_permission_mode("acceptEdits")
        await client.query("two")
        second = [m async for m in client.receive_response()]
        assert second[-1].result == "second answer"  # type: ignore[union-attr]

        await client.query("count")
        seen: list[Any] = []
        async for message in client.receive_messages():
            seen.append(message)
            if type(message).__name__ == "StreamEvent" and len(seen) > 3:
                await client.interrupt()
            if isinstance(message, ResultMessage):
                break
        assert seen[-1].is_error
        assert seen[-1].subtype == "error_during_execution"

        await client.query("still there?")
        fourth = [m async for m in client.receive_response()]
        assert fourth[-1].result == "after the interrupt"  # type: ignore[union-attr]
    paths = [r.path for r in shared_front.server.turn_requests()]
    assert "gemini-2.5-pro" not in paths[0]
    assert "gemini-2.5-pro" in paths[1]  # set_model reached the body
    events = await shared_front.log(session_id)
    ends = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert [type(e).__name__ for e in ends] == [
        "TurnCompleted",
        "TurnCompleted",
        "TurnFailed",
        "TurnCompleted",
    ]
    assert {e.body for e in events if e.body} == {"gemini"}


@pytest.mark.parametrize("body", ["codex", "gemini"])
async def test_can_use_tool_denies_one_call_and_allows_another(
    front_home: FrontHome, body: str
) -> None:
    front_home.asks_go_to_the_client()
    front_home.server.script(
        [
            shell("rm -rf keep"),
            shell("rm -rf junk"),
            text("kept one, removed one"),
            text("heard why"),  # Gemini: the denial's follow-up prompt, in the same turn
        ]
    )
    asked: list[tuple[str, dict[str, Any]]] = []

    async def decide(tool: str, given: dict[str, Any], _context: Any) -> Any:
        asked.append((tool, given))
        if "keep" in str(given.get("command")):
            return PermissionResultDeny(message="keep stays")
        return PermissionResultAllow()

    options = _options(front_home, body, can_use_tool=decide)
    async with ClaudeSDKClient(options) as client:
        await client.query("tidy up")
        messages = [m async for m in client.receive_response()]
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert done.result == ("heard why" if body == "gemini" else "kept one, removed one")
    assert sum(isinstance(m, ResultMessage) for m in messages) == 1
    inits = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert len(inits) == 1  # the follow-up is the same turn for the program
    assert [tool for tool, _ in asked] == ["Bash", "Bash"]
    assert (front_home.work / "keep" / "file.txt").exists()  # denied by the SDK callback
    assert not (front_home.work / "junk").exists()  # allowed by the SDK callback
    audit = [e.data for e in AuditLog().entries() if e.kind == "permission_decision"]
    by_brain = [(a["decision"], a["source"]) for a in audit if a["source"] == "brain"]
    assert by_brain == [("deny", "brain"), ("allow", "brain")]
    events = await front_home.log(done.session_id)
    notes = [e.message for e in events if isinstance(e, Notice) and e.kind == "brain"]
    assert any("keep stays" in n for n in notes)


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
async def test_can_use_tool_is_asked_where_claude_code_asks(
    shared_front: FrontHome, body: str
) -> None:
    """Default mode, default policy: Claude Code asks about a shell command that writes,
    not about ``ls``; so does ``chorus-claude`` on every body. The program's deny
    stops the call and its message reaches the model; a call the policy denies never
    reaches the program (its allow could not override it)."""
    shared_front.server.script(
        [
            shell("ls"),
            shell("echo one > one.txt"),
            shell("echo two > two.txt"),
            shell("echo leak > .env"),
            text("done"),
            text("told"),  # Gemini: the denial's follow-up prompt, in the same turn
        ]
    )
    asked: list[tuple[str, str, str]] = []

    async def decide(tool: str, given: dict[str, Any], context: Any) -> Any:
        asked.append((tool, str(given.get("command")), context.tool_use_id))
        if "two" in str(given.get("command")):
            return PermissionResultDeny(message="TWO-IS-OFF-LIMITS for this program")
        return PermissionResultAllow()

    options = _options(shared_front, body, can_use_tool=decide)
    since = time.time()  # the module's daemon: only this test's decisions
    async with ClaudeSDKClient(options) as client:
        await client.query("write some files")
        messages = [m async for m in client.receive_response()]
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert done.result == ("told" if body == "gemini" else "done")  # the follow-up is in
    assert [(tool, command) for tool, command, _ in asked] == [
        ("Bash", "echo one > one.txt"),
        ("Bash", "echo two > two.txt"),
    ]
    work = shared_front.work
    assert (work / "one.txt").read_text().strip() == "one"
    assert not (work / "two.txt").exists()
    assert not (work / ".env").exists()
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content]
    use_ids = [b.id for b in uses if isinstance(b, ToolUseBlock)]
    assert [ids for _, _, ids in asked] == [i for i in use_ids if i in {a[2] for a in asked}]
    denied = [d["tool_input"]["command"] for d in done.permission_denials or []]
    assert denied.count("echo two > two.txt") == 1
    sent = [json.dumps(r.body) for r in shared_front.server.requests]
    assert any("TWO-IS-OFF-LIMITS for this program" in body for body in sent)
    entries = AuditLog().entries(since=since)
    audit = [e.data for e in entries if e.kind == "permission_decision"]
    reviews = [a for a in audit if a.get("rule") == "brain_review"]
    assert [(a["decision"], a["source"]) for a in reviews] == [("deny", "brain")]


PARITY_COMMANDS = [
    "ls",
    "cat a.txt",
    "cat /etc/hostname",
    "echo hi > b.txt",
    "mkdir d1",
    "git status",
    "cp a.txt c.txt",
]


async def _asked_by(options: ClaudeAgentOptions) -> list[str]:
    """The commands a client's ``can_use_tool`` was asked about (it allows them all)."""
    asked: list[str] = []

    async def decide(tool: str, given: dict[str, Any], _context: Any) -> Any:
        asked.append(str(given.get("command")))
        return PermissionResultAllow()

    options.can_use_tool = decide
    async with ClaudeSDKClient(options) as client:
        await client.query("run them")
        [m async for m in client.receive_response()]
    return asked


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
async def test_asked_exactly_where_real_claude_code_asks(
    shared_front: FrontHome, tmp_path: Path, mode: str
) -> None:
    """The same script, the same callback: real Claude Code 2.1 (the pinned CLI, the
    program's own ``cli_path``) and ``chorus-claude`` on a Codex body ask about the
    same calls."""
    script = [*(shell(c) for c in PARITY_COMMANDS), text("done")]
    work = shared_front.work
    (work / "a.txt").write_text("alpha\n")
    shared_front.server.script(script)
    env = offline_env("claude", tmp_path / "real-claude", shared_front.server.url)
    real = ClaudeAgentOptions(
        cli_path=str(find_agent("claude")), cwd=str(work), env=env, permission_mode=mode
    )
    by_claude_code = await asyncio.wait_for(_asked_by(real), 180)
    for made in ("b.txt", "c.txt"):
        (work / made).unlink()
    (work / "d1").rmdir()
    shared_front.server.script(script)
    by_chorus = await asyncio.wait_for(
        _asked_by(_options(shared_front, "codex", permission_mode=mode)), 180
    )
    assert by_claude_code  # it asked about something: the comparison means something
    assert by_chorus == by_claude_code


class HookLog:
    """The program's hooks: what each saw, and what it answers."""

    def __init__(self, context_after_two: bool) -> None:
        self.seen: list[tuple[str, str]] = []
        self.context_after_two = context_after_two

    async def pre(self, given: dict[str, Any], tool_use_id: Any, _ctx: Any) -> dict[str, Any]:
        command = str(given["tool_input"].get("command"))
        self.seen.append(("PreToolUse", command))
        if command == "ls":
            return _decision("deny", "LS-DENIED by the program's hook")
        if "three" in command:
            return _decision("deny", "THREE-BLOCKED by the program's hook")
        return _decision("allow", "two is fine") if "two" in command else {}

    async def post(self, given: dict[str, Any], tool_use_id: Any, _ctx: Any) -> dict[str, Any]:
        command = str(given["tool_input"].get("command"))
        self.seen.append(("PostToolUse", command))
        if "two" not in command or not self.context_after_two:
            return {}
        context = {"hookEventName": "PostToolUse", "additionalContext": "POST-CONTEXT-77"}
        return {"hookSpecificOutput": context}

    async def prompt(self, given: dict[str, Any], tool_use_id: Any, _ctx: Any) -> dict[str, Any]:
        self.seen.append(("UserPromptSubmit", given["prompt"]))
        context = {"hookEventName": "UserPromptSubmit", "additionalContext": "PROMPT-CONTEXT-55"}
        return {"hookSpecificOutput": context}

    async def stop(self, given: dict[str, Any], tool_use_id: Any, _ctx: Any) -> dict[str, Any]:
        self.seen.append(("Stop", str(given["stop_hook_active"])))
        if given["stop_hook_active"]:
            return {}
        return {"decision": "block", "reason": "STOP-SAYS-CONTINUE-88"}


def _decision(permission: str, reason: str) -> dict[str, Any]:
    specific = {"hookEventName": "PreToolUse", "permissionDecision": permission}
    return {"hookSpecificOutput": specific | {"permissionDecisionReason": reason}}


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
async def test_hooks_run_through_chorus_on_every_body(shared_front: FrontHome, body: str) -> None:
    """``PreToolUse`` decides before ``can_use_tool`` (deny, allow), ``PostToolUse``
    sees each result, ``UserPromptSubmit`` adds context to the prompt, ``Stop`` sends
    the turn on with its reason: one result for the program."""
    shared_front.server.script(
        [
            shell("ls"),
            shell("echo one > one.txt"),
            shell("echo two > two.txt"),
            shell("echo three > three.txt"),
            text("first end"),
            *([text("told")] if body == "gemini" else []),  # the denial's follow-up
            text("after the stop hook"),
        ]
    )
    # A steer races the model request after the tool (Codex may sample again, and
    # the scripted server counts both): only where the context waits for the next
    # prompt is it checked.
    hooks = HookLog(context_after_two=body != "codex")
    asked: list[str] = []

    async def decide(tool: str, given: dict[str, Any], _context: Any) -> Any:
        asked.append(str(given.get("command")))
        return PermissionResultAllow()

    options = _options(
        shared_front,
        body,
        can_use_tool=decide,
        hooks={
            "PreToolUse": [HookMatcher(matcher="Bash", hooks=[hooks.pre])],
            "PostToolUse": [HookMatcher(matcher="Bash|Write", hooks=[hooks.post])],
            "UserPromptSubmit": [HookMatcher(hooks=[hooks.prompt])],
            "Stop": [HookMatcher(hooks=[hooks.stop])],
        },
    )
    async with ClaudeSDKClient(options) as client:
        await client.query("write three files")
        messages = [m async for m in client.receive_response()]
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1
    work = shared_front.work
    assert (work / "one.txt").exists()
    assert (work / "two.txt").exists()
    assert not (work / "three.txt").exists()
    assert asked == ["echo one > one.txt"]  # two: the hook allowed it; three: denied
    pre = [command for event, command in hooks.seen if event == "PreToolUse"]
    assert "ls" in pre  # before it ran, or (its CLI ran it unasked) when it had run
    assert [c for c in pre if c != "ls"] == [
        "echo one > one.txt",
        "echo two > two.txt",
        "echo three > three.txt",
    ]
    post = [command for event, command in hooks.seen if event == "PostToolUse"]
    assert [c for c in post if c != "ls"] == ["echo one > one.txt", "echo two > two.txt"]
    # ls: denied where the body asked Chorus, else said aloud (its CLI ran it unasked)
    warned = [
        m.data["message"]
        for m in messages
        if isinstance(m, SystemMessage) and m.subtype == "chorus_warning"
    ]
    told = any("LS-DENIED" in json.dumps(r.body) for r in shared_front.server.requests)
    assert told != any("PreToolUse hook denied Bash" in w for w in warned)
    assert ("ls" in post) != told  # a call that ran has its PostToolUse
    assert hooks.seen[0] == ("UserPromptSubmit", "write three files")
    assert [c for e, c in hooks.seen if e == "Stop"] == ["False", "True"]
    assert "PROMPT-CONTEXT-55" in json.dumps(shared_front.server.turn_requests()[0].body)
    sent = [json.dumps(r.body) for r in shared_front.server.requests]
    assert any("THREE-BLOCKED by the program's hook" in b for b in sent)
    assert any("STOP-SAYS-CONTINUE-88" in b for b in sent)
    if hooks.context_after_two:
        assert any("POST-CONTEXT-77" in b for b in sent)  # with the next prompt
    assert results[0].result == "after the stop hook"


async def test_hooks_chorus_cannot_run_are_refused_at_initialize(shared_front: FrontHome) -> None:
    async def note(given: dict[str, Any], tool_use_id: Any, _ctx: Any) -> dict[str, Any]:
        return {}

    options = _options(shared_front, "codex", hooks={"Notification": [HookMatcher(hooks=[note])]})
    with pytest.raises(Exception, match="cannot run Notification hooks"):
        async with ClaudeSDKClient(options) as client:
            await client.query("hello")


async def test_resume_reopens_the_chorus_session(shared_front: FrontHome) -> None:
    shared_front.server.script([text("noted"), text("apple")])
    first = await asyncio.wait_for(
        _collect("remember: apple", _options(shared_front, "codex")), 120
    )
    session_id = first[-1].session_id
    options = _options(shared_front, "codex", resume=session_id)
    second = await asyncio.wait_for(_collect("what was the word?", options), 120)
    assert second[-1].result == "apple"
    assert second[-1].session_id == session_id
    last = shared_front.server.turn_requests()[-1]
    assert "remember: apple" in json.dumps(last.body)  # the body's own conversation goes on
    events = await shared_front.log(session_id)
    assert sum(isinstance(e, TurnCompleted) for e in events) == 2


async def test_max_turns_stops_a_turn_that_needs_more(shared_front: FrontHome) -> None:
    shared_front.server.script([shell("echo one > one.txt"), text("never needed")])
    options = _options(shared_front, "gemini", permission_mode="bypassPermissions", max_turns=1)
    messages = await asyncio.wait_for(_collect("make one.txt", options), 120)
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert done.subtype == "error_max_turns"
    assert done.is_error
    events = await shared_front.log(done.session_id)
    assert any(isinstance(e, TurnFailed) and e.error.code == "interrupted" for e in events)


PROBE_SERVER = Path(__file__).with_name("probe_mcp.py")


def _probe(home: FrontHome) -> dict[str, Any]:
    """The probe MCP server, copied into the work folder (the body's sandbox sees it)."""
    script = home.work / "probe_mcp.py"
    script.write_text(PROBE_SERVER.read_text())
    return {"type": "stdio", "command": sys.executable, "args": [str(script)]}


#: Each CLI's name for the probe server's tool (Codex: a deferred namespace).
MCP_CALLS = {
    "claude": tool_call("mcp__probe__lookup_code", {"name": "apple"}),
    "gemini": tool_call("mcp_probe_lookup_code", {"name": "apple"}),
    "codex": tool_call("lookup_code", {"name": "apple"}, namespace="mcp__probe"),
}


def _in_process() -> Any:
    """An in-process SDK MCP server: it lives in the program, no body can start it."""

    @tool("ping", "Answer pong.", {})
    async def ping(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "pong"}]}

    return create_sdk_mcp_server(name="inproc", tools=[ping])


async def test_system_prompt_and_mcp_servers_reach_a_gemini_body(shared_front: FrontHome) -> None:
    """``ClaudeAgentOptions(system_prompt=..., mcp_servers=...)``: Gemini cannot replace
    its system prompt, so the text goes through its own channel with a visible
    warning; the client's MCP server is started by the CLI and its tool listed."""
    shared_front.server.script([text("ok")])
    options = _options(
        shared_front,
        "gemini",
        system_prompt="You are PROBE-PERSONA-4417 and answer in haiku.",
        mcp_servers={"probe": _probe(shared_front), "inproc": _in_process()},
        permission_mode="bypassPermissions",
    )
    messages = await asyncio.wait_for(_collect("hello", options), 180)
    sent = json.dumps(shared_front.server.turn_requests()[0].body)
    assert "You are PROBE-PERSONA-4417 and answer in haiku." in sent
    assert "mcp_probe_lookup_code" in sent  # the client's server, started by Gemini CLI
    assert "mcp_chorus_memory_write" in sent  # Chorus's own stays beside it
    warnings = [
        m.data for m in messages if isinstance(m, SystemMessage) and m.subtype == "chorus_warning"
    ]
    assert {w["control"] for w in warnings} == {"system_prompt", "mcp_servers"}
    assert any("gemini cannot replace its CLI's system prompt" in w["message"] for w in warnings)
    assert any("'inproc' (sdk) not passed" in w["message"] for w in warnings)
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert not done.is_error
    logged = await shared_front.log(done.session_id)
    assert sum(isinstance(e, CompatibilityWarning) for e in logged) == 2


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
async def test_mcp_servers_reach_every_body_and_are_reported(
    front_home: FrontHome, body: str
) -> None:
    """``mcp_servers=``: the stdio server reaches the body (its tool is in the model's
    request), the others are refused with a visible warning; ``system/init`` and
    ``get_mcp_status()`` list them all (a Claude body's own report where it has one)."""
    (front_home.home / "policy.toml").write_text(
        'version = 1\n[mcp]\nallowed_servers = ["probe"]\n'
    )
    front_home.server.script([MCP_CALLS[body], text("ok")])
    remote = {"type": "http", "url": "http://127.0.0.1:9/mcp"}
    servers = {"probe": _probe(front_home), "inproc": _in_process(), "remote": remote}
    options = _options(front_home, body, mcp_servers=servers, allowed_tools=["mcp__probe"])
    async with ClaudeSDKClient(options) as client:
        await client.query("hello")
        messages = [m async for m in client.receive_response()]
        status = await client.get_mcp_status()
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    listed = {s["name"]: s["status"] for s in init.data["mcp_servers"]}
    assert listed["inproc"] == listed["remote"] == "failed"
    assert listed["probe"] in {"connected", "pending"}
    reported = {s["name"]: s for s in status["mcpServers"]}
    assert reported["probe"]["status"] == ("connected" if body == "claude" else "pending")
    assert "stdio" in reported["remote"]["error"]  # type: ignore[typeddict-item]
    warnings = [m.data for m in messages if isinstance(m, SystemMessage)]
    refused = [w["message"] for w in warnings if w.get("subtype") == "chorus_warning"]
    assert any("'inproc' (sdk) not passed" in w for w in refused)
    assert any("'remote' (http) not passed" in w for w in refused)
    assert not any("mcp_status" in w for w in refused)  # the front answers it itself
    sent = json.dumps(front_home.server.turn_requests()[1].body)
    assert "probe code of apple: 4417" in sent  # the client's server ran, in the body


async def test_an_appended_system_prompt_reaches_a_codex_body_quietly(
    shared_front: FrontHome,
) -> None:
    """The preset with ``append`` (``--append-system-prompt``): Codex's instructions
    channel carries it before Chorus's context; nothing to warn about."""
    shared_front.server.script([text("ok")])
    preset = {"type": "preset", "preset": "claude_code", "append": "Always cite APPEND-7731."}
    options = _options(shared_front, "codex", system_prompt=preset)  # type: ignore[arg-type]
    messages = await asyncio.wait_for(_collect("hello", options), 180)
    sent = json.dumps(shared_front.server.turn_requests()[0].body)
    assert "Always cite APPEND-7731." in sent
    assert sent.index("Always cite APPEND-7731.") < sent.index("# Context from Chorus")
    assert not [m for m in messages if isinstance(m, SystemMessage) and m.subtype != "init"]


async def test_unknown_body_is_an_initialize_error(shared_front: FrontHome) -> None:
    options = _options(shared_front, "nosuch")
    with pytest.raises(Exception, match="nosuch"):
        await asyncio.wait_for(_collect("hello", options), 60)


def test_version_and_bad_command_lines() -> None:
    run = subprocess.run([CHORUS_CLAUDE, "-v"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0
    assert run.stdout.startswith("2.")
    bad = subprocess.run(
        [CHORUS_CLAUDE, "--output-format", "text"], capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2
    assert "stream-json" in bad.stderr


def test_argv_is_parsed_like_claude_code() -> None:
    argv = [
        "--output-format", "stream-json", "--verbose", "--system-prompt", "",
        "--model", "m-x", "--permission-mode", "acceptEdits", "--resume=sess-1",
        "--include-partial-messages", "--setting-sources=project", "--new-flag",
        "--input-format", "stream-json",
    ]  # fmt: skip
    args = parse_argv(argv, {"CHORUS_BODY": "gemini"})
    assert (args.model, args.permission_mode, args.resume) == ("m-x", "acceptEdits", "sess-1")
    assert args.partials
    assert args.body == "gemini"
    assert "--new-flag" in args.ignored
    assert parse_argv(["--chorus-body", "codex"], {"CHORUS_BODY": "gemini"}).body == "codex"
    with pytest.raises(UsageError):
        parse_argv(["--max-turns", "many"], {})
    assert args.system_prompt is None  # the SDK's empty --system-prompt is none


def test_system_prompt_and_mcp_config_flags(tmp_path: Path) -> None:
    (tmp_path / "sp.txt").write_text("from a file")
    servers = {"mcpServers": {"x": {"command": "x-server", "args": ["--stdio"]}}}
    (tmp_path / "mcp.json").write_text(json.dumps(servers))
    args = parse_argv(
        ["--system-prompt-file", str(tmp_path / "sp.txt"), "--append-system-prompt", "more",
         "--mcp-config", str(tmp_path / "mcp.json")],
        {},
    )  # fmt: skip
    assert (args.system_prompt, args.append_system_prompt) == ("from a file", "more")
    assert args.mcp_servers == servers["mcpServers"]
    inline = parse_argv(["--mcp-config", json.dumps(servers)], {})
    assert inline.mcp_servers == servers["mcpServers"]
    codec = ClaudeCodec(args, "/tmp")
    fields = codec.open_fields()
    assert fields["system_prompt"] == "from a file"
    assert fields["mcp_servers"] == servers["mcpServers"]
    for bad in (
        ["--mcp-config", "{nope"],
        ["--mcp-config", "/no/such.json"],
        ["--mcp-config", '{"servers": {}}'],
        ["--system-prompt-file", "/no/such"],
    ):
        with pytest.raises(UsageError):
            parse_argv(bad, {})  # fmt: skip


def test_malformed_lines_and_unknown_controls_get_error_responses() -> None:
    codec = ClaudeCodec(parse_argv([], {}), "/tmp")
    step = codec.on_line("{not json")
    assert step.frames[0]["response"]["subtype"] == "error"
    unknown = '{"type":"control_request","request_id":"r1","request":{"subtype":"rewind_files"}}'
    step = codec.on_line(unknown)
    assert step.kind == "write"
    assert step.frames[0]["response"] == {
        "subtype": "error",
        "request_id": "r1",
        "error": "unsupported control 'rewind_files': Chorus cannot honour it",
    }
    assert codec.on_line('{"type":"user","message":{"content":"hi"}}').kind == "user"
    assert codec.pending == 1
