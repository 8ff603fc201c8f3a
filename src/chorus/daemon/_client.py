"""The CLI's client for the daemon: httpx over the unix socket, starting it on first use."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx

from chorus._errors import ChorusError, UserError
from chorus.daemon._lifecycle import DaemonError, is_responding, spawn_daemon
from chorus.daemon._paths import socket_path
from chorus.events import Event, parse_event


class DaemonClient:
    """Synchronous client. Every call starts the daemon first when ``autostart``."""

    def __init__(self, *, autostart: bool = True, timeout: float = 30.0) -> None:
        self.autostart = autostart
        self.timeout = timeout

    def _client(self, timeout: float | None = None) -> httpx.Client:
        if self.autostart:
            spawn_daemon()
        elif not is_responding():
            raise DaemonError("the daemon is not running (start it with `chorus start`)")
        transport = httpx.HTTPTransport(uds=str(socket_path()))
        return httpx.Client(
            transport=transport, base_url="http://chorus", timeout=timeout or self.timeout
        )

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        with self._client() as client:
            try:
                resp = client.request(method, path, **kw)
            except httpx.HTTPError as exc:
                raise DaemonError(f"daemon request failed: {exc}") from exc
        return _decode(resp)

    # -- jobs ----------------------------------------------------------------------

    def submit(self, **request: Any) -> dict[str, Any]:
        return dict(self._call("POST", "/jobs", json=request))

    def jobs(self, state: str | None = None) -> list[dict[str, Any]]:
        params = {"state": state} if state else {}
        return list(self._call("GET", "/jobs", params=params))

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{job_id}"))

    def interrupt(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/jobs/{job_id}/interrupt"))

    def events(self, job_id: str, *, from_seq: int = 1, follow: bool = True) -> Iterator[Event]:
        """The job's events; with ``follow`` it blocks until the job ends."""
        params = {"from_seq": str(from_seq), "follow": "1" if follow else "0"}
        with (
            self._client(timeout=None) as client,
            client.stream("GET", f"/jobs/{job_id}/events", params=params) as resp,
        ):
            if resp.status_code != 200:
                resp.read()
                _decode(resp)
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    yield parse_event(line[6:])

    # -- worktrees (issue 24) -----------------------------------------------------------

    def worktrees(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/worktrees"))

    def worktree(self, job_id: str, action: str = "", **body: Any) -> dict[str, Any]:
        """``action``: "" (describe), ``diff`` (GET); ``merge``, ``rm`` (POST with ``body``)."""
        path = f"/worktrees/{job_id}" + (f"/{action}" if action else "")
        if action in ("", "diff"):
            return dict(self._call("GET", path))
        return dict(self._call("POST", path, json=body))

    def prune_worktrees(self) -> dict[str, Any]:
        return dict(self._call("POST", "/worktrees/prune"))

    # -- sessions and the daemon --------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/sessions"))

    def session(self, session_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/sessions/{session_id}"))

    def pause(self, session_id: str, *, drain_timeout: float = 600.0) -> None:
        """Stop new jobs of the session from starting, then wait until none runs."""
        self._call("POST", f"/sessions/{session_id}/pause")
        deadline = time.monotonic() + drain_timeout
        while self.session(session_id).get("busy"):
            if time.monotonic() > deadline:
                self.resume(session_id)
                raise DaemonError(f"session {session_id} is still running a job")
            time.sleep(0.1)

    def resume(self, session_id: str) -> None:
        self._call("POST", f"/sessions/{session_id}/resume")

    def status(self) -> dict[str, Any]:
        return dict(self._call("GET", "/status"))

    def shutdown(self) -> None:
        self._call("POST", "/shutdown")


def _decode(resp: httpx.Response) -> Any:
    """JSON body of a success; a typed error otherwise (4xx: the user's, 5xx: ours)."""
    try:
        data = resp.json()
    except ValueError:
        data = {"error": resp.text}
    if resp.status_code < 400:
        return data
    message = data.get("error", resp.text) if isinstance(data, dict) else resp.text
    if resp.status_code < 500:
        raise UserError(message)
    raise ChorusError(f"daemon error: {message}")
