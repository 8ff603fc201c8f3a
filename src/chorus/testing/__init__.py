"""Chorus testing layer: a scripted fake model server and offline CLI environments.

Typical use::

    from chorus.testing import ModelServer, Scenario, shell, text, offline_env, run_headless

    scenario = Scenario.of(shell("echo hi > out.txt"), text("done"))
    with ModelServer(scenario) as server:
        env = offline_env("codex", tmp_path / "home", server.url)
        run = run_headless("codex", find_agent("codex"), "make out.txt", cwd=work, env=env)
        assert server.turn_requests()[1].last_tool_result() is not None
"""

from chorus.testing._offline import (
    CLIS,
    CODEX_KEY_VAR,
    CODEX_MODEL,
    CODEX_OFFLINE_FLAGS,
    FAKE_API_KEY,
    GEMINI_MODEL,
    Cli,
    HeadlessRun,
    OfflineCli,
    base_env,
    claude_env,
    codex_config,
    codex_env,
    gemini_env,
    gemini_settings,
    headless_argv,
    offline_env,
    prepare_cli,
    run_headless,
)
from chorus.testing._postgres import PostgresCluster, PostgresNotFoundError, free_port
from chorus.testing._recording import RecordedRequest, RequestKind
from chorus.testing._scenario import (
    Block,
    ErrorKind,
    Failure,
    Reply,
    Scenario,
    ScenarioLike,
    Shell,
    Text,
    Thinking,
    ToolCall,
    Turn,
    WriteFile,
    error,
    shell,
    slow_text,
    text,
    thinking,
    tool_call,
    write_file,
)
from chorus.testing._server import DEFAULT_LANE, EXHAUSTED_TEXT, ModelServer
from chorus.testing._stub import SocketStub, send_created, send_event, send_stream_head
from chorus.testing._wire import Api, SseMessage, ToolResult, parse_sse

__all__ = [
    "CLIS",
    "CODEX_KEY_VAR",
    "CODEX_MODEL",
    "CODEX_OFFLINE_FLAGS",
    "DEFAULT_LANE",
    "EXHAUSTED_TEXT",
    "FAKE_API_KEY",
    "GEMINI_MODEL",
    "Api",
    "Block",
    "Cli",
    "ErrorKind",
    "Failure",
    "HeadlessRun",
    "ModelServer",
    "OfflineCli",
    "PostgresCluster",
    "PostgresNotFoundError",
    "RecordedRequest",
    "Reply",
    "RequestKind",
    "Scenario",
    "ScenarioLike",
    "Shell",
    "SocketStub",
    "SseMessage",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Turn",
    "WriteFile",
    "base_env",
    "claude_env",
    "codex_config",
    "codex_env",
    "error",
    "free_port",
    "gemini_env",
    "gemini_settings",
    "headless_argv",
    "offline_env",
    "parse_sse",
    "prepare_cli",
    "run_headless",
    "send_created",
    "send_event",
    "send_stream_head",
    "shell",
    "slow_text",
    "text",
    "thinking",
    "tool_call",
    "write_file",
]
