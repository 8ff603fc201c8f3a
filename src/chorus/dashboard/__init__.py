"""The browser dashboard, served by the daemon on ``127.0.0.1:7070``: start a job
from any page (prompt, agent or router, folder, permission mode, worktree,
framework), follow it as a conversation (the prompt, answers as sanitized
markdown, each tool call as a card, bookkeeping events behind "raw events"),
streamed over SSE and resumed from the log with ``Last-Event-ID``; answer its
approvals and flags where you read it; review the diff of what it wrote and merge
or discard a worktree job; steer or queue from one box. The job list, the board,
teams and provider health stream live too. Every page passes axe-core with no
serious or critical violation.

``chorus dashboard`` prints a one-time login URL (see :mod:`._auth`); every POST
needs the page's CSRF token and Origin; every response forbids framing and any
script but the dashboard's own (Content-Security-Policy).
"""

from chorus.dashboard._app import Dashboard, build_dashboard_app
from chorus.dashboard._auth import COOKIE, CSRF_HEADER, DashboardAuth
from chorus.dashboard._render import diff_html, markdown_html
from chorus.dashboard._server import (
    address_path,
    bind_problem,
    dashboard_running,
    is_loopback,
    login_routes,
)
from chorus.dashboard._stream import resume_seq
from chorus.dashboard._views import CostBook, job_rows

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "CostBook",
    "Dashboard",
    "DashboardAuth",
    "address_path",
    "bind_problem",
    "build_dashboard_app",
    "dashboard_running",
    "diff_html",
    "is_loopback",
    "job_rows",
    "login_routes",
    "markdown_html",
    "resume_seq",
]
