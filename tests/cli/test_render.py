"""The renderer shows each thing once on every body: streamed text, thinking, tool
calls announced twice (ACP), slash-command tags, missing session fields."""

from __future__ import annotations

from typing import Any

from chorus.cli._jobs import Answer, job_table, short_ids, status_lines
from chorus.cli._render import Renderer, Segments


def _render(events: list[dict[str, Any]]) -> str:
    out: list[str] = []

    def write(segments: Segments, end: str) -> None:
        out.append("".join(text for _, text in segments) + end)

    renderer = Renderer(write)
    for seq, event in enumerate(events, 1):
        renderer.feed({"seq": seq, **event})
    renderer.close()
    return "".join(out)


def test_deltas_stream_and_the_whole_message_is_not_repeated() -> None:
    out = _render(
        [
            {"type": "text_delta", "text": "Hel", "message_id": "m1"},
            {"type": "text_delta", "text": "lo", "message_id": "m1"},
            {"type": "text", "text": "Hello", "message_id": "m1"},
            {"type": "job_ended", "state": "succeeded"},
        ]
    )
    assert out.count("Hello") == 1
    assert out.splitlines() == ["   1 assistant Hello", "   4 job succeeded"]


def test_a_metered_request_mid_answer_leaves_the_streamed_line_whole() -> None:
    out = _render(
        [
            {"type": "text_delta", "text": "streamed s", "message_id": "m1"},
            {"type": "metered", "api": "anthropic", "usage": {"input_tokens": 3}},
            {"type": "text_delta", "text": "lowly", "message_id": "m1"},
            {"type": "text", "text": "streamed slowly", "message_id": "m1"},
        ]
    )
    assert out == "   1 assistant streamed slowly\n"


def test_delta_only_bodies_show_their_answer() -> None:
    """ACP bodies (gemini, claude-code-acp, codex-acp) send only deltas."""
    out = _render([{"type": "text_delta", "text": "from "}, {"type": "text_delta", "text": "acp"}])
    assert out == "   1 assistant from acp\n"


def test_thinking_deltas_then_the_whole_thought_print_once() -> None:
    out = _render(
        [
            {"type": "thinking", "text": "hmm ", "delta": True, "message_id": "m"},
            {"type": "thinking", "text": "ok", "delta": True, "message_id": "m"},
            {"type": "thinking", "text": "hmm ok", "message_id": "m"},
            {"type": "text", "text": "done", "message_id": "m"},
        ]
    )
    assert out.count("hmm") == 1
    assert out.splitlines()[-1] == "   4 assistant done"


def test_acp_tool_call_announced_empty_then_full_is_shown_once_with_its_input() -> None:
    out = _render(
        [
            {
                "type": "tool_call",
                "call_id": "c1",
                "tool": "shell",
                "native_tool": "x",
                "input": {},
            },
            {
                "type": "tool_call",
                "call_id": "c1",
                "tool": "shell",
                "native_tool": "x",
                "input": {"command": "ls"},
            },
            {"type": "tool_result", "call_id": "c1", "output": "a.txt"},
        ]
    )
    assert out.count("tool shell") == 1
    assert '{"command": "ls"}' in out
    assert "{}" not in out


def test_command_tags_and_missing_fields_are_not_shown() -> None:
    out = _render(
        [
            {"type": "session_started", "body": "codex-exec", "model": None, "cwd": None},
            {"type": "text", "text": "<local-command-stdout>Cost: $0</local-command-stdout>"},
        ]
    )
    assert out.splitlines() == ["   1 session codex-exec", "   2 assistant Cost: $0"]


def test_answer_is_the_text_after_the_last_tool() -> None:
    answer = Answer()
    for event in [
        {"type": "text", "text": "Let me look.", "message_id": "a"},
        {"type": "tool_call", "call_id": "c"},
        {"type": "text_delta", "text": "Found ", "message_id": "b"},
        {"type": "text_delta", "text": "it.", "message_id": "b"},
    ]:
        answer.feed(event)
    assert answer.text({"state": "succeeded", "result": None}) == "Found it."
    assert answer.text({"state": "succeeded", "result": "Result."}) == "Result."


def test_short_ids_are_unique_prefixes() -> None:
    ids = ["abcdef0011", "abcdef0022", "99990000aa"]
    assert short_ids(ids) == {
        "abcdef0011": "abcdef001",
        "abcdef0022": "abcdef002",
        "99990000aa": "99990000",
    }


def test_job_table_fits_the_width() -> None:
    rows = [
        {
            "id": "a" * 32,
            "state": "running",
            "body": "claude",
            "session_id": "b" * 32,
            "prompt": "x " * 200,
        },
    ]
    lines = job_table(rows, 80).splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[1].startswith("aaaaaaaa running")


def test_status_lines_name_every_body_and_the_gateway() -> None:
    data = {
        "pid": 7,
        "started_at": 0.0,
        "jobs": {"succeeded": 2},
        "router_bodies": ["claude", "gemini"],
        "health": [
            {
                "key": "claude@abc123",
                "outcomes": [True, False],
                "cooldown_until": 100.0,
                "quota_state": "rate_limited",
            },
        ],
        "paused_sessions": [],
        "gateway": {"tcp": None, "tcp_error": "port 7719 in use"},
    }
    lines = status_lines(data, now=40.0)
    assert "jobs: 2 succeeded" in lines
    assert (
        "  claude: rate_limited (key abc123), success 50% of last 2, cooling down 60s more" in lines
    )
    assert "  gemini: healthy, no data yet" in lines
    assert "gateway: off: port 7719 in use" in lines


def test_job_table_names_each_jobs_node_when_there_are_nodes() -> None:
    rows = [
        {"id": "a" * 32, "state": "running", "body": "claude", "node": "hostA-1", "prompt": "p"},
        {"id": "c" * 32, "state": "queued", "body": None, "node": None, "prompt": "q"},
    ]
    head, first, second = job_table(rows, 120).splitlines()
    assert head.split()[:5] == ["job", "state", "body", "session", "node"]
    assert first.split()[:5] == ["aaaaaaaa", "running", "claude", "-", "hostA-1"]
    assert second.split()[:5] == ["cccccccc", "queued", "-", "-", "-"]
    assert "node" not in job_table([{**rows[1]}], 120).splitlines()[0]  # none: no column


def test_status_lines_show_each_node_and_what_it_runs() -> None:
    data = {
        "pid": 7,
        "started_at": 0.0,
        "jobs": {"running": 1},
        "node": {"id": "a-1"},
        "nodes": [
            {"id": "a-1", "host": "hostA", "last_seen": 38.0, "running": ["j" * 32]},
            {"id": "b-2", "host": "hostB", "last_seen": 30.0, "running": []},
        ],
        "routines_leader": False,
        "store_outage": "the database has been unreachable for 12s (refused)",
        "accepting_jobs": False,
    }
    lines = status_lines(data, now=40.0)
    assert "  a-1 (this daemon) on hostA, seen 2s ago: runs jjjjjjjj" in lines
    assert "  b-2 on hostB, seen 10s ago: runs nothing" in lines
    assert "routines: another node fires them" in lines
    assert "store: the database has been unreachable for 12s (refused)" in lines
    assert "not accepting new jobs until the database is back" in lines


def test_status_lines_show_the_providers_reset_the_next_routine_and_todays_spend() -> None:
    data = {
        "pid": 7,
        "started_at": 0.0,
        "router_bodies": ["claude"],
        "health": [
            {
                "key": "claude@default",
                "outcomes": [False],
                "cooldown_until": 40.0 + 3 * 86400,
                "quota_state": "exhausted",
                "reset_from_provider": True,
            }
        ],
        "next_routine": {"name": "heartbeat", "at": 40.0 + 1500},
        "spend_today": {"day": "2026-11-23", "usd": 1.25, "bodies": {"claude": 1.25}},
        "budget": {"daily_usd": 20.0, "per_job_usd": None, "bodies": {"claude": 15.0}},
    }
    lines = status_lines(data, now=40.0)
    assert (
        "  claude: exhausted (own login), success 0% of last 1,"
        " cooling down 3.0d more (until the provider's reset)" in lines
    )
    assert "next routine: heartbeat in 25m" in lines
    assert "spend today: $1.25 of $20.00 (daily_usd) (claude $1.25 of $15.00)" in lines


def test_routed_line_says_where_and_why_and_bookkeeping_is_hidden() -> None:
    lines: list[str] = []
    renderer = Renderer(lambda segs, end: lines.append("".join(t for _, t in segs) + end))
    renderer.feed(
        {
            "type": "routed",
            "seq": 2,
            "to_body": "codex",
            "reason": "first healthy for deep_reasoning/token_light",
            "skipped": ["claude: cooling down, 20s left"],
            "failover": False,
        }
    )
    renderer.feed({"type": "unknown", "seq": 3, "native_type": "mcpServer/startupStatus/updated"})
    renderer.feed(
        {
            "type": "notice",
            "seq": 4,
            "kind": "warning",
            "message": "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS"
            " package manager. Codex will use the bundled bubblewrap in the meantime.",
        }
    )
    assert lines == [
        "   2 routed to codex: first healthy for deep_reasoning/token_light;"
        " claude: cooling down, 20s left (no failover)\n"
    ]
