"""What the daemon does with the guardian's findings: each incident audited, logged
as a structured line and sent to the desktop (when notifications are on)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from chorus.integrity._guardian import RELOADED, Guardian, Incident
from chorus.policy import AuditLog

log = logging.getLogger("chorus.integrity")
Notify = Callable[[str, str], Awaitable[None]]


async def report(incidents: list[Incident], audit: AuditLog, notify: Notify | None) -> None:
    for incident in incidents:
        audit.append("integrity_incident", incident.to_json())
        fields = {"event": "integrity_incident", **incident.to_json()}
        log.warning("integrity incident", extra={"structured": fields})  # a JSON line
        if notify is not None:
            await notify(f"Chorus restored {incident.name}", told(incident))


def told(incident: Incident) -> str:
    """What a person reads about ``incident``: what happened and how to keep an edit."""
    said = f"{incident.name} was changed outside Chorus and has been restored"
    if incident.quarantined is None:
        return said + "."
    said += f"; the changed file is in {incident.quarantined}."
    if incident.name in RELOADED:
        return said + " If it was your edit: chorus reload --take-back"
    return said + f" To keep it: copy it back, then chorus integrity accept {incident.name}"


async def guard_now(audit: AuditLog, notify: Notify | None = None) -> list[Incident]:
    """Check every guarded file now and report what was undone."""
    incidents = Guardian().check()
    await report(incidents, audit, notify)
    return incidents
