"""Server mechanics: lanes, scenario cursor, recording, keep-alive, slow streams."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from chorus.testing import (
    EXHAUSTED_TEXT,
    ModelServer,
    Scenario,
    error,
    parse_sse,
    slow_text,
    text,
)

CLAUDE = "/v1/messages?beta=true"


def claude_body(prompt: str = "hi") -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": prompt}]}


def streamed_text(response: httpx.Response) -> str:
    return "".join(
        e.data["delta"].get("text", "")
        for e in parse_sse(response.content)
        if e.event == "content_block_delta"
    )


def test_turns_are_consumed_in_order_then_exhausted(model_server: ModelServer) -> None:
    model_server.script(Scenario.of(text("one"), text("two")))
    with httpx.Client(base_url=model_server.url, timeout=10) as client:
        answers = [streamed_text(client.post(CLAUDE, json=claude_body())) for _ in range(3)]
    assert answers == ["one", "two", EXHAUSTED_TEXT]
    assert [r.kind for r in model_server.requests] == ["turn", "turn", "exhausted"]
    assert [r.turn_index for r in model_server.requests] == [0, 1, None]
    assert model_server.remaining_turns() == 0


def test_failure_repeats_times_then_moves_on(model_server: ModelServer) -> None:
    model_server.script([error("server_error", times=2), text("recovered")])
    with httpx.Client(base_url=model_server.url, timeout=10) as client:
        statuses = [client.post(CLAUDE, json=claude_body()).status_code for _ in range(3)]
    assert statuses == [500, 500, 200]
    assert [r.turn_index for r in model_server.requests] == [0, 0, 1]


def test_failure_forever_never_advances(model_server: ModelServer) -> None:
    model_server.script([error("rate_limit", times=None), text("never")])
    with httpx.Client(base_url=model_server.url, timeout=10) as client:
        statuses = [client.post(CLAUDE, json=claude_body()).status_code for _ in range(5)]
    assert statuses == [429] * 5
    assert model_server.remaining_turns() == 2


def test_lanes_have_independent_scenarios(model_server: ModelServer) -> None:
    model_server.script([text("main")])
    lane_url = model_server.script([text("lane a")], lane="a")
    assert lane_url == f"{model_server.url}/lanes/a"
    lane = httpx.post(lane_url + CLAUDE, json=claude_body(), timeout=10)
    main = httpx.post(model_server.url + CLAUDE, json=claude_body(), timeout=10)
    assert (streamed_text(lane), streamed_text(main)) == ("lane a", "main")
    assert [(r.lane, r.path) for r in model_server.requests] == [("a", CLAUDE), ("default", CLAUDE)]
    assert model_server.turn_requests(lane="a")[0].last_user_text() == "hi"


def test_reset_forgets_scenarios_requests_and_rate_limit(model_server: ModelServer) -> None:
    model_server.script([text("main"), text("left over")])
    lane_url = model_server.script([text("lane a")], lane="a")
    model_server.state_rate_limit(5)
    first = httpx.post(model_server.url + CLAUDE, json=claude_body(), timeout=10)
    assert "anthropic-ratelimit-requests-remaining" in first.headers
    model_server.reset()
    assert model_server.requests == []
    assert (model_server.remaining_turns(), model_server.remaining_turns("a")) == (0, 0)
    lane = httpx.post(lane_url + CLAUDE, json=claude_body(), timeout=10)
    assert streamed_text(lane) == EXHAUSTED_TEXT
    assert "anthropic-ratelimit-requests-remaining" not in lane.headers
    model_server.script([text("after")])
    main = httpx.post(model_server.url + CLAUDE, json=claude_body(), timeout=10)
    assert streamed_text(main) == "after"
    assert [r.kind for r in model_server.requests] == ["exhausted", "turn"]


def test_bad_lane_name_is_rejected(model_server: ModelServer) -> None:
    with pytest.raises(ValueError, match="bad lane"):
        model_server.lane_url("a/b")


def test_keep_alive_connection_serves_many_calls(model_server: ModelServer) -> None:
    """Claude reuses one connection for all calls: chunked streams must not close it."""
    model_server.script([text("one"), text("two"), text("three")])
    seen: list[str] = []
    with socket.create_connection(("127.0.0.1", model_server.port), timeout=5) as sock:
        reader = sock.makefile("rb")
        for _ in range(3):
            payload = json.dumps(claude_body()).encode()
            sock.sendall(
                b"POST " + CLAUDE.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
            seen.append(read_chunked_response(reader))
        reader.close()
    assert ["one" in s for s in seen] == [True, False, False]
    assert "three" in seen[2]


def read_chunked_response(reader: Any) -> str:
    """Read one HTTP/1.1 chunked response off a raw socket file."""
    status = reader.readline()
    assert status.startswith(b"HTTP/1.1 200")
    headers = {}
    while (line := reader.readline()) != b"\r\n":
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    assert headers["transfer-encoding"] == "chunked"
    assert "connection" not in headers
    body = b""
    while (size := int(reader.readline().strip(), 16)) != 0:
        body += reader.read(size)
        reader.readline()
    reader.readline()
    return body.decode()


def test_concurrent_clients_are_served_in_parallel(model_server: ModelServer) -> None:
    """A slow stream on one connection must not block another client."""
    model_server.script([slow_text("slow", chunks=4, delay=0.3)], lane="slow")
    model_server.script([text("fast")], lane="fast")
    slow_done = threading.Event()

    def slow_client() -> None:
        httpx.post(model_server.lane_url("slow") + CLAUDE, json=claude_body(), timeout=10)
        slow_done.set()

    worker = threading.Thread(target=slow_client)
    worker.start()
    model_server.wait_for(lambda rs: any(r.lane == "slow" for r in rs), timeout=5)
    fast = httpx.post(model_server.lane_url("fast") + CLAUDE, json=claude_body(), timeout=10)
    assert streamed_text(fast) == "fast"
    assert not slow_done.is_set()
    worker.join(timeout=10)
    assert slow_done.is_set()


def test_slow_stream_paces_deltas(model_server: ModelServer) -> None:
    model_server.script([slow_text("abcd", chunks=4, delay=0.1)])
    arrivals: list[float] = []
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", model_server.url + CLAUDE, json=claude_body()) as response,
    ):
        for chunk in response.iter_raw():
            if b"text_delta" in chunk:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 4
    assert arrivals[-1] - arrivals[0] >= 0.25


def test_client_disconnect_mid_stream_is_recorded(model_server: ModelServer) -> None:
    model_server.script([slow_text("x" * 20, chunks=20, delay=0.2), text("after")])
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", model_server.url + CLAUDE, json=claude_body()) as response,
    ):
        for chunk in response.iter_raw():
            if b"text_delta" in chunk:
                break  # hang up like an interrupted CLI
    model_server.wait_for(lambda rs: rs[0].disconnected, timeout=5)
    after = httpx.post(model_server.url + CLAUDE, json=claude_body(), timeout=10)
    assert streamed_text(after) == "after"
    assert model_server.requests[0].disconnected
    assert not model_server.requests[1].disconnected


def test_stop_cuts_a_slow_stream_quickly() -> None:
    server = ModelServer([slow_text("y" * 20, chunks=20, delay=0.5)]).start()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            httpx.post(server.url + CLAUDE, json=claude_body(), timeout=10)
        except httpx.HTTPError as exc:
            errors.append(exc)

    worker = threading.Thread(target=reader)
    worker.start()
    server.wait_for(lambda rs: len(rs) == 1, timeout=5)
    started = time.monotonic()
    server.stop()
    worker.join(timeout=5)
    assert time.monotonic() - started < 2
    assert len(errors) == 1  # the truncated chunked body is an error for the client
    assert server.errors == []


def test_gzip_and_chunked_request_bodies(model_server: ModelServer) -> None:
    model_server.script([text("a"), text("b")])
    raw = json.dumps(claude_body("zipped")).encode()
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    httpx.post(model_server.url + CLAUDE, content=gzip.compress(raw), headers=headers, timeout=10)

    def pieces() -> Any:
        body = json.dumps(claude_body("chunked")).encode()
        yield body[:10]
        yield body[10:]

    httpx.post(model_server.url + CLAUDE, content=pieces(), timeout=10)
    first, second = model_server.turn_requests()
    assert second.headers["transfer-encoding"] == "chunked"
    assert (first.last_user_text(), second.last_user_text()) == ("zipped", "chunked")


def test_unknown_paths_get_404_and_are_recorded(model_server: ModelServer) -> None:
    assert httpx.get(model_server.url + "/v1/models", timeout=5).status_code == 404
    assert httpx.post(model_server.url + "/nope", json={}, timeout=5).status_code == 404
    assert [(r.method, r.kind, r.status) for r in model_server.requests] == [
        ("GET", "other", 404),
        ("POST", "other", 404),
    ]


def test_wait_for_times_out(model_server: ModelServer) -> None:
    with pytest.raises(TimeoutError):
        model_server.wait_for(lambda rs: len(rs) > 0, timeout=0.1)


async def test_usable_from_async_code() -> None:
    async with ModelServer([text("async hello")]) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            response = await client.post(CLAUDE, json=claude_body())
        assert streamed_text(response) == "async hello"
        assert server.turn_requests()[0].api == "anthropic"
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
