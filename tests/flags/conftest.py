"""The flags tests use the dashboard's daemon fixture (a daemon with the dashboard
on a free port, Claude pointed at a scripted server)."""

from tests.dashboard.conftest import dash_with

__all__ = ["dash_with"]
