"""The browser dashboard, served by the daemon on ``127.0.0.1:7070``:
jobs with a live status, a job's conversation and tool log streaming (SSE, resumed
from the log with ``Last-Event-ID``), a steer box, flags and approvals, routines,
provider health, memory search and the audit chain's state.

``chorus dashboard`` prints a one-time login URL (see :mod:`._auth`).
"""

from chorus.dashboard._app import Dashboard, build_dashboard_app
from chorus.dashboard._auth import COOKIE, CSRF_HEADER, DashboardAuth
from chorus.dashboard._server import address_path, dashboard_running, is_loopback, login_routes
from chorus.dashboard._stream import resume_seq
from chorus.dashboard._views import CostBook, job_rows

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "CostBook",
    "Dashboard",
    "DashboardAuth",
    "address_path",
    "build_dashboard_app",
    "dashboard_running",
    "is_loopback",
    "job_rows",
    "login_routes",
    "resume_seq",
]
