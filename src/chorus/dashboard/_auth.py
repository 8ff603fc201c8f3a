"""Who may use the dashboard: a one-time login token becomes a session cookie.

``chorus dashboard`` asks the daemon (over its 0600 unix socket, which is the
authentication) for a login URL carrying a one-time token. Visiting it sets an
``HttpOnly``, ``SameSite=Strict`` cookie naming a browser session; each session
has its own CSRF token, which every POST must carry (form field ``csrf`` or
header ``X-CSRF-Token``). Sessions live in the daemon's memory: a restarted
daemon asks for a new login.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

COOKIE = "chorus_dashboard"
CSRF_HEADER = "x-csrf-token"
#: How long a login URL may wait before it is used.
LOGIN_TTL_S = 600.0
#: How long a browser session lasts.
SESSION_TTL_S = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class BrowserSession:
    cookie: str
    csrf: str
    expires: float


class DashboardAuth:
    """One-time login tokens and the browser sessions they opened."""

    def __init__(self) -> None:
        self._logins: dict[str, float] = {}
        self._sessions: dict[str, BrowserSession] = {}

    def new_login(self, ttl_s: float = LOGIN_TTL_S) -> str:
        """A token good for one login within ``ttl_s`` seconds."""
        token = secrets.token_urlsafe(32)
        self._logins[token] = time.time() + ttl_s
        return token

    def redeem(self, token: str) -> BrowserSession | None:
        """Spend ``token`` on a new browser session; None if unknown, used or expired."""
        expires = self._logins.pop(token, None)
        if expires is None or expires < time.time():
            return None
        session = BrowserSession(
            secrets.token_urlsafe(32), secrets.token_urlsafe(24), time.time() + SESSION_TTL_S
        )
        self._sessions[session.cookie] = session
        return session

    def session(self, cookie: str | None) -> BrowserSession | None:
        """The live session behind ``cookie``, if any."""
        found = self._sessions.get(cookie or "")
        if found is None or found.expires < time.time():
            return None
        return found

    def csrf_ok(self, session: BrowserSession, given: str | None) -> bool:
        return bool(given) and secrets.compare_digest(session.csrf, given or "")
