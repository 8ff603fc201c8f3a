"""What Chorus adds to a body, in each CLI's terms (bodies/_inject.py), and the context
put before the first prompt of bodies without a system-prompt channel."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from chorus.bodies import BodyOptions, McpServer
from chorus.bodies._inject import acp_servers, claude_args, codex_args, gemini_env
from chorus.bodies.acp import AcpBody
from chorus.bodies.claude import ClaudeBody
from chorus.bodies.gemini import GeminiBody

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
