"""What Chorus adds to a body, in each CLI's terms (bodies/_inject.py), and the context
put before the first prompt of bodies without a system-prompt channel."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from chorus.bodies import (
    BodyOptions,
    Channel,
    McpServer,
    close_channel,
    open_channel,
    token_channel,
)
from chorus.bodies._inject import acp_servers, claude_args, codex_args, gemini_env
from chorus.bodies.acp import AcpBody
from chorus.bodies.claude import ClaudeBody
from chorus.bodies.gemini import GeminiBody
from chorus.context import add_body_extras

SERVER = McpServer(
    command="/usr/bin/python3",
    args=("-m", "chorus", "mcp", "--session", "s1"),
    env={"CHORUS_HOME": "/h o/me"},
    required=True,
)
CONTEXT = 'Line one\nQuotes " and \\ backslash, unicode é ✓'


def _options(tmp_path: Path, **kw: object) -> BodyOptions:
    return BodyOptions(
        cwd=tmp_path, system_prompt_append=CONTEXT, mcp_servers={"chorus": SERVER}, **kw
    )  # type: ignore[arg-type]


def test_claude_gets_append_system_prompt_and_an_mcp_config(tmp_path: Path) -> None:
    args = claude_args(_options(tmp_path))
    assert args[:2] == ["--append-system-prompt", CONTEXT]
    assert args[2] == "--mcp-config"
    assert json.loads(args[3]) == {
        "mcpServers": {
            "chorus": {
                "type": "stdio",
                "command": "/usr/bin/python3",
                "args": ["-m", "chorus", "mcp", "--session", "s1"],
                "env": {"CHORUS_HOME": "/h o/me"},
            }
        }
    }
    assert claude_args(BodyOptions(cwd=tmp_path)) == []


def test_codex_overrides_are_valid_toml(tmp_path: Path) -> None:
    args = codex_args(_options(tmp_path))
    assert args[0::2] == ["-c", "-c"]
    parsed = [tomllib.loads(value) for value in args[1::2]]
    assert parsed[0] == {"developer_instructions": CONTEXT}
    assert parsed[1] == {
        "mcp_servers": {
            "chorus": {
                "command": "/usr/bin/python3",
                "args": ["-m", "chorus", "mcp", "--session", "s1"],
                "env": {"CHORUS_HOME": "/h o/me"},
                "required": True,
            }
        }
    }


def test_acp_servers_are_in_session_new_form(tmp_path: Path) -> None:
    assert acp_servers(_options(tmp_path)) == [
        {
            "name": "chorus",
            "command": "/usr/bin/python3",
            "args": ["-m", "chorus", "mcp", "--session", "s1"],
            "env": [{"name": "CHORUS_HOME", "value": "/h o/me"}],
        }
    ]


def test_gemini_headless_reads_the_servers_from_a_system_defaults_file(tmp_path: Path) -> None:
    env = gemini_env(_options(tmp_path))
    settings = json.loads(Path(env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]).read_text())
    assert settings == {
        "mcpServers": {
            "chorus": {
                "command": "/usr/bin/python3",
                "args": ["-m", "chorus", "mcp", "--session", "s1"],
                "env": {"CHORUS_HOME": "/h o/me"},
            }
        }
    }
    assert gemini_env(BodyOptions(cwd=tmp_path)) == {}


def test_the_context_goes_before_a_new_sessions_first_prompt_only(tmp_path: Path) -> None:
    assert AcpBody.context_in_first_prompt
    assert GeminiBody.context_in_first_prompt
    assert not ClaudeBody.context_in_first_prompt
    body = GeminiBody(_options(tmp_path))
    assert body._with_context("hello") == f"{CONTEXT}\n\n---\n\nhello"
    assert body._with_context("again") == "again"
    resumed = GeminiBody(_options(tmp_path, resume="abc"))
    assert resumed._with_context("hello") == "hello"  # the session already has it
    claude = ClaudeBody(_options(tmp_path))
    assert claude._with_context("hello") == "hello"  # it has --append-system-prompt


# -- Chorus's own server: the session's channel, an HTTP URL ---------------------------

URL = "http://127.0.0.1:4242/s/s1.0123456789abcdef0123456789abcdef/mcp"
CHANNEL = McpServer(url=URL, required=True)


def _http(tmp_path: Path) -> BodyOptions:
    return BodyOptions(cwd=tmp_path, mcp_servers={"chorus": CHANNEL})


def test_claude_takes_the_channel_as_an_http_server(tmp_path: Path) -> None:
    args = claude_args(_http(tmp_path))
    assert json.loads(args[1]) == {"mcpServers": {"chorus": {"type": "http", "url": URL}}}


async def _echo(message: dict[str, object]) -> dict[str, object] | None:
    return message


def test_a_live_claude_takes_an_in_band_server_on_its_stdio_and_others_by_url(
    tmp_path: Path,
) -> None:
    inband = McpServer(url=URL, required=True, inband=_echo)
    mine = BodyOptions(cwd=tmp_path, mcp_servers={"chorus": inband, "theirs": CHANNEL})
    live = json.loads(claude_args(mine, inband=True)[1])["mcpServers"]
    assert live == {
        "chorus": {"type": "sdk", "name": "chorus"},
        "theirs": {"type": "http", "url": URL},
    }
    # One-shot Claude (no control protocol) reaches the same server by its URL.
    once = json.loads(claude_args(mine)[1])["mcpServers"]
    assert once == {"chorus": {"type": "http", "url": URL}, "theirs": {"type": "http", "url": URL}}


def test_codex_takes_the_channel_by_url(tmp_path: Path) -> None:
    (_, value) = codex_args(_http(tmp_path))
    assert tomllib.loads(value) == {"mcp_servers": {"chorus": {"url": URL, "required": True}}}


def test_gemini_reads_the_channel_url_from_its_env_not_from_a_shared_file(
    tmp_path: Path,
) -> None:
    env = gemini_env(_http(tmp_path))
    settings = Path(env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]).read_text()
    assert "s1." not in settings  # the token is the session's: not in a file in /tmp
    assert json.loads(settings) == {"mcpServers": {"chorus": {"httpUrl": "${CHORUS_MCP_URL_0}"}}}
    assert env["CHORUS_MCP_URL_0"] == URL
    other = gemini_env(BodyOptions(cwd=tmp_path, mcp_servers={"chorus": McpServer(url="x")}))
    assert other["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] == env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]


def test_an_acp_agent_gets_the_channel_over_http_or_through_the_relay(tmp_path: Path) -> None:
    assert acp_servers(_http(tmp_path)) == [
        {"type": "http", "name": "chorus", "url": URL, "headers": []}
    ]
    (relayed,) = acp_servers(_http(tmp_path), http=False)
    assert relayed["name"] == "chorus"
    assert relayed["command"] == sys.executable
    assert relayed["args"][:2] == ["-S", "-I"]  # no site packages: starts in milliseconds
    assert Path(relayed["args"][2]).name == "_relay.py"
    assert relayed["args"][3:] == [URL]
    assert relayed["env"] == []


def test_a_body_started_in_the_daemon_is_given_its_sessions_url(tmp_path: Path) -> None:
    """What ``add_body_extras`` gives a body while the daemon serves the channel: an
    HTTP URL with the session's token, and no program for Chorus's tools."""
    channel = Channel("127.0.0.1", 4242, b"k" * 32)
    open_channel(channel)
    try:
        options = add_body_extras(BodyOptions(cwd=tmp_path), "s1")
    finally:
        close_channel(channel)
    server = options.mcp_servers["chorus"]
    assert server == McpServer(url=channel.url("s1"), required=True)
    assert server.command == ""
    config = json.loads(claude_args(options)[-1])["mcpServers"]["chorus"]
    assert config == {"type": "http", "url": channel.url("s1")}
    assert token_channel(channel.key, str(server.url).split("/")[4]) == "s1"
