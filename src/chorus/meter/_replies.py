"""The answers the meter gives itself, each in its API's own error shape, so the CLI
reads them as it reads its provider's: a budget reached (400, not retried by any of
the CLIs, so the turn ends), an upstream that cannot be reached (502), a request too
large to forward (413)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from chorus.meter._usage import Api

_GOOGLE_STATUS = {400: "FAILED_PRECONDITION", 413: "INVALID_ARGUMENT", 502: "UNAVAILABLE"}
_ANTHROPIC_TYPE = {400: "invalid_request_error", 413: "request_too_large", 502: "api_error"}
_OPENAI_TYPE = {400: "invalid_request_error", 413: "invalid_request_error", 502: "server_error"}


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.body)).encode()),
        ]


def api_error(api: Api, status: int, message: str, code: str) -> Reply:
    """``message`` as ``api`` states an error of ``status`` (``code``: OpenAI's)."""
    if api == "anthropic":
        body: object = {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPE[status], "message": message},
        }
    elif api == "openai":
        error = {"message": message, "type": _OPENAI_TYPE[status], "param": None, "code": code}
        body = {"error": error}
    else:
        body = {"error": {"code": status, "message": message, "status": _GOOGLE_STATUS[status]}}
    return Reply(status, json.dumps(body).encode())


def budget_reply(api: Api, why: str) -> Reply:
    message = (
        f"Chorus budget reached: {why}. Chorus stopped this request before it reached "
        "the provider; raise the limit in [budget] (config.toml, then chorus reload)."
    )
    return api_error(api, 400, message, "budget_exceeded")


def unreachable_reply(api: Api, upstream: str, why: str) -> Reply:
    message = f"Chorus meter: {upstream} could not be reached: {why}"
    return api_error(api, 502, message, "bad_gateway")


def too_large_reply(api: Api, limit: int) -> Reply:
    message = f"Chorus meter: the request is over {limit >> 20} MiB; it was not forwarded"
    return api_error(api, 413, message, "request_too_large")
