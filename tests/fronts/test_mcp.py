"""The MCP servers a front reports (sans-I/O): the body's own report where its CLI
gives one, else what Chorus handed over (``pending``) or refused (``failed``)."""

from __future__ import annotations

from openai_codex.generated.v2_all import McpServerStatus

from chorus.fronts import McpReport

GIVEN = {
    "probe": {"type": "stdio", "command": "probe-server", "args": ["--stdio"]},
    "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
    "broken": {"type": "stdio"},
}


def test_what_was_handed_over_and_what_was_not() -> None:
    report = McpReport(GIVEN, body="gemini")
    assert report.init_entries() == [
        {"name": "probe", "status": "pending"},
        {"name": "remote", "status": "failed"},
        {"name": "broken", "status": "failed"},
    ]
    probe, remote, _ = report.answer()["mcpServers"]
    assert probe["config"] == {"type": "stdio", "command": "probe-server", "args": ["--stdio"]}
    assert "gemini" in probe["chorus"]
    assert "stdio" in remote["error"]


def test_the_bodys_own_report_wins() -> None:
    report = McpReport(GIVEN, body="claude")
    report.native = [
        {"name": "probe", "status": "connected", "serverInfo": {"name": "probe", "version": "1"}},
        {"name": "chorus", "status": "connected"},
    ]
    assert [(e["name"], e["status"]) for e in report.entries()] == [
        ("probe", "connected"),
        ("chorus", "connected"),
        ("remote", "failed"),
        ("broken", "failed"),
    ]


def test_the_app_servers_shape_validates() -> None:
    for entry in McpReport(GIVEN, body="codex").codex_list():
        McpServerStatus.model_validate(entry)
