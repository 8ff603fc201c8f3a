"""The one table from exceptions to HTTP answers, and the routes that use it."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from chorus._errors import ChorusError, ConfigError, NotFoundError, UserError
from chorus._json_input import BadJsonError
from chorus.routines import UnknownRoutineError
from chorus.store import FlagDecidedError, StoreError, UnknownJobError, UnknownRecordError
from chorus.teams import UnknownTeamError
from chorus.web import bad_request, code_of, error_response, guarded, status_of
from chorus.worktrees import GitError


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (NotFoundError("no such thing"), 404),
        (UnknownRoutineError("nightly"), 404),
        (UnknownTeamError("crew"), 404),
        (UnknownRecordError("no such record"), 404),
        (UnknownJobError("job-1"), 404),
        (FlagDecidedError("decided already"), 409),
        (ConfigError("config.toml: bad key"), 400),
        (BadJsonError("not JSON"), 400),
        (UserError("bad input"), 400),
        (StoreError("disk gone"), 500),
        (ChorusError("broken"), 500),
        (RuntimeError("surprise"), 500),
    ],
)
def test_each_error_has_one_status(exc: BaseException, status: int) -> None:
    assert status_of(exc) == status


def test_the_code_is_the_errors_own_or_its_class_name() -> None:
    assert code_of(BadJsonError("too big", "body_too_large")) == "body_too_large"
    assert code_of(UnknownRoutineError("nightly")) == "UnknownRoutineError"
    # A numeric ``code`` (an exit code) is not a stable code: the class name is.
    assert code_of(GitError(["merge"], 128, "conflict")) == "GitError"


def test_the_answer_is_json_with_message_and_code() -> None:
    resp = error_response(UnknownRoutineError("nightly"))
    assert resp.status_code == 404
    assert resp.body == (
        b'{"error":"no routine named \'nightly\' (see `chorus routine list`)",'
        b'"code":"UnknownRoutineError"}'
    )
    assert bad_request("limit must be a number").status_code == 400


def _app() -> Starlette:
    async def fails(request: Request) -> Response:
        kind = request.path_params["kind"]
        errors: dict[str, Exception] = {
            "record": UnknownRecordError("no such job"),
            "team": UnknownTeamError("crew"),
            "user": UserError("bad input"),
            "store": StoreError("disk gone"),
        }
        raise errors[kind]

    async def works(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/fail/{kind}", guarded(fails)), Route("/ok", guarded(works))])


def test_a_guarded_route_answers_by_the_table() -> None:
    client = TestClient(_app())
    assert client.get("/ok").json() == {"ok": True}
    got = {kind: client.get(f"/fail/{kind}") for kind in ("record", "team", "user", "store")}
    assert {kind: resp.status_code for kind, resp in got.items()} == {
        "record": 404,
        "team": 404,
        "user": 400,
        "store": 500,
    }
    assert got["store"].json() == {"error": "disk gone", "code": "StoreError"}
