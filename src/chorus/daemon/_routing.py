"""The ``routed`` event of a job: which body it runs on and why.

Computed when the job is submitted, appended to its log right after it is
queued, so ``ask``, ``watch`` and ``log`` show it before the body says anything.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from chorus._errors import UserError
from chorus.events import Routed

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor
    from chorus.jobs import JobRequest


async def route_request(sup: Supervisor, req: JobRequest) -> tuple[JobRequest, Routed]:
    """``req`` with its body filled in where the router picks it, and the event
    saying why."""
    failover = req.failover is not False
    if req.session_id:
        session = await sup.store.get_session(req.session_id)
        why = f"continues session {session.id[:12]} on its body"
        return req, Routed(to_body=req.body or session.body, reason=why, failover=failover)
    if req.body:
        why = "named by its routine" if req.firing is not None else "asked for with --body"
        return req, Routed(to_body=req.body, reason=why, failover=failover)
    route = sup.router.explain(
        req.prompt, sup.health, time.time(), key=sup.provider_key, unready=sup.unready
    )
    if not route.body:
        raise UserError("no body is configured for routing ([router] bodies in config.toml)")
    cls = route.classification
    event = Routed(
        to_body=route.body,
        reason=route.reason,
        strategy=route.strategy,
        kind=cls.kind.value if cls else None,
        load=cls.load.value if cls else None,
        skipped=route.skipped,
        failover=failover,
    )
    return replace(req, body=route.body), event
