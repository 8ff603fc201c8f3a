"""What a job request must satisfy, checked by the client before it is sent (with no
daemon running) and by the daemon when it is received."""

from __future__ import annotations

from chorus._limits import prompt_problem

__all__ = ["prompt_problem"]
