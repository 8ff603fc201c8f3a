"""The one reader of JSON request bodies: limits before decoding, a clear 400 always."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from chorus import UserError
from chorus._json_input import BadJsonError, parse_json, read_object


def test_good_json_comes_back_as_it_was() -> None:
    nested = "[" * 64 + "]" * 64
    assert parse_json(b'{"a": [1, "\\u00e9", {"b": null}]}') == {"a": [1, "é", {"b": None}]}
    assert parse_json(nested) == eval(nested)  # exactly the limit is fine
    assert parse_json('"[[[[ in a string is not nesting"', max_depth=1) == (
        "[[[[ in a string is not nesting"
    )
    assert parse_json('{"k": "a \\" quote then [[["}', max_depth=1) == {"k": 'a " quote then [[['}


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"[" * 10_000 + b"]" * 10_000, "nested deeper than 64 levels"),
        (b'{"a":' * 65 + b"1" + b"}" * 65, "nested deeper than 64 levels"),
        (b'{"text": "\xff\xfe"}', "not UTF-8 text"),
        (b"{", "is not JSON"),
        (b"", "is not JSON"),
        (b'{"n": NaN}', "NaN is not JSON"),
        (b'{"n": Infinity}', "Infinity is not JSON"),
        (b'{"s": "\\ud800"}', "lone surrogate"),
        (b'{"\\udfff": 1}', "lone surrogate"),
        (b"1" * 5000, "is not JSON"),  # over Python's int digits limit
    ],
)
def test_bad_json_is_a_user_error_that_says_why(data: bytes, words: str) -> None:
    with pytest.raises(BadJsonError) as refused:
        parse_json(data)
    assert isinstance(refused.value, UserError)
    assert words in str(refused.value)


def test_a_body_over_the_cap_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(BadJsonError) as refused:
        parse_json(b"[" * 2000, max_bytes=1000)
    assert (refused.value.code, str(refused.value)) == (
        "body_too_large",
        "the request body is over 2,000 bytes; the limit is 1,000",
    )


def _app() -> TestClient:
    async def echo(request: Request) -> Response:
        try:
            return JSONResponse(await read_object(request, empty={}, max_bytes=100))
        except BadJsonError as exc:
            return JSONResponse({"error": str(exc), "code": exc.code}, 400)

    return TestClient(Starlette(routes=[Route("/", echo, methods=["POST"])]))


def test_a_request_body_is_read_with_its_cap_and_must_be_an_object() -> None:
    client = _app()
    assert client.post("/", content=b"").json() == {}
    assert client.post("/", content=b'{"a": 1}').json() == {"a": 1}
    listed = client.post("/", content=b"[1]")
    assert (listed.status_code, listed.json()["error"]) == (
        400,
        "the request body must be a JSON object",
    )
    big = client.post("/", content=b'{"a": "' + b"x" * 200 + b'"}')
    assert big.status_code == 400
    assert big.json()["code"] == "body_too_large"
