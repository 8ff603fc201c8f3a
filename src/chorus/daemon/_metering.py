"""The model-API meter in the daemon (``chorus.meter``): served on the sessions'
channel listener, its requests attributed to the session the token names and the
job running there; budgets from the ledger; each request's ``metered`` event in the
session's log; what the providers say of their quotas in ``status``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from chorus._errors import ChorusError
from chorus.bodies import NO_SESSION, Channel, channel_key
from chorus.daemon._budget import refusal
from chorus.events import Event, Metered
from chorus.mcpserver import SessionRoute
from chorus.meter import ROUTE, MeterApp, close_meter, open_meter, price_table
from chorus.store import ORIGIN_CHORUS

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor

log = logging.getLogger("chorus.daemon")


class DaemonMeter:
    """The meter's sink: asks the ledger, tells the ledger and the log."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    def admit(self, channel: str, api: str) -> str | None:
        job, body = self._where(channel)
        why = refusal(self.sup.ledger, self.sup.config.budget, job or "", body or "")
        if why is not None and job is not None:
            self.sup.ledger.refused.setdefault(job, why)
        return why

    def record(self, channel: str, event: Metered) -> None:
        job, body = self._where(channel)
        session = "" if channel == NO_SESSION else channel
        event = event.model_copy(update={"job_id": job, "body": body or "", "session_id": session})
        self.sup.ledger.observe(event)
        if session:
            self._append(session, event)

    def _where(self, channel: str) -> tuple[str | None, str | None]:
        return (None, None) if channel == NO_SESSION else self.sup.running_on(channel)

    def _append(self, session: str, event: Metered) -> None:
        try:
            future = self.sup.store.append_nowait(session, event, origin=ORIGIN_CHORUS)
        except ChorusError as exc:  # the writer's queue full, the store closed
            log.warning("meter: a request of session %s was not logged: %s", session, exc)
            return
        future.add_done_callback(_logged)


def _logged(future: asyncio.Future[Event]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("meter: a request was not logged: %s", exc)


def build_meter(sup: Supervisor) -> MeterApp | None:
    """The meter ``[meter]`` asks for (None: off), its quotas in ``status``."""
    if not sup.config.meter.enabled:
        return None
    prices = price_table({k: v.model_dump() for k, v in sup.config.meter.prices.items()})
    meter = MeterApp(channel_key(), DaemonMeter(sup), prices)
    sup.status_hooks.append(lambda: {"quota": meter.quotas.snapshot()})
    return meter


def meter_routes(meter: MeterApp | None) -> dict[str, SessionRoute]:
    return {ROUTE: meter} if meter is not None else {}


@contextlib.asynccontextmanager
async def metering(channel: Channel, meter: MeterApp | None) -> AsyncIterator[None]:
    """Point the bodies started in the block at ``channel``'s meter."""
    if meter is None:
        yield
        return
    open_meter(channel)
    try:
        yield
    finally:
        close_meter(channel)
        await meter.close()
