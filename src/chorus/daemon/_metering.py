"""The model-API meter in the daemon (``chorus.meter``): its own process, found or
started at the daemon's start (``MeterHost``: no wait), linked to the daemon. Each
request is attributed to the session its token names and the job running there;
budgets come from the ledger; each request's ``metered`` event goes in the session's
log (priced with ``[meter.prices]``); the quotas the providers state go in
``status``, and a body whose provider says it is nearly out is routed around until
that window resets. The meter is told the secrets to keep from the providers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from chorus._errors import ChorusError
from chorus.bodies import NO_SESSION, Channel, channel_key
from chorus.config import run_dir
from chorus.daemon._budget import refusal
from chorus.events import Event, Metered
from chorus.mcpserver import SessionRoute
from chorus.meter import (
    API_OF_CLI,
    MeterHost,
    QuotaBook,
    Window,
    close_meter,
    open_meter,
    point_body,
    price_table,
)
from chorus.session import cli_name, keep_flag
from chorus.store import ORIGIN_CHORUS

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor

log = logging.getLogger("chorus.daemon")
#: ``[agents.*.env]`` names whose values are credentials (hidden from the providers).
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)


class DaemonMeter:
    """The meter's daemon side: asks the ledger, tells the ledger, the log, the
    quota book and the router's health."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.prices = price_table({k: v.model_dump() for k, v in sup.config.meter.prices.items()})
        self.quotas = QuotaBook()
        self.host = MeterHost(
            run_dir(),
            self.ingest,
            self.admit,
            self.secrets,
            orphan_s=sup.config.daemon.orphan_timeout_s or 900.0,
            budgets=self.budgets,
            verdict=self.verdict,
        )

    def budgets(self) -> bool:
        """Whether any ``[budget]`` limit is set (else the meter need not ask)."""
        budget = self.sup.config.budget
        return bool(budget.daily_usd or budget.per_job_usd or budget.bodies)

    def admit(self, channel: str, api: str) -> str | None:
        """The meter asks before a request goes: a refusal stops the job."""
        why = self.verdict(channel, api)
        job, _ = self._where(channel)
        if why is not None and job is not None:
            self.sup.ledger.refused.setdefault(job, why)
        return why

    def verdict(self, channel: str, api: str) -> str | None:
        """What :meth:`admit` would say, the job left alone (pushed to the meter)."""
        job, body = self._where(channel)
        return refusal(self.sup.ledger, self.sup.config.budget, job or "", body or "")

    def ingest(self, record: dict[str, Any]) -> asyncio.Future[Event] | None:
        if record.get("kind") == "quota":
            self._stated(record)
            return None
        if record.get("kind") == "metered":
            event = Metered.model_validate(record["event"])
            return self.record(str(record.get("channel") or NO_SESSION), event)
        return None

    def record(self, channel: str, event: Metered) -> asyncio.Future[Any] | None:
        job, body = self._where(channel)
        session = "" if channel == NO_SESSION else channel
        if session and job is None:  # made while no daemon ran, or before a re-attach
            return asyncio.ensure_future(self._record_later(session, event))
        return self._keep(session, job, body, event)

    def _keep(
        self, session: str, job: str | None, body: str | None, event: Metered
    ) -> asyncio.Future[Event] | None:
        cost = self.prices.cost(event.model, event.usage)
        event = event.model_copy(
            update={"job_id": job, "body": body or "", "session_id": session, "cost_usd": cost}
        )
        self.sup.ledger.observe(event)
        return self._append(session, event) if session else None

    async def _record_later(self, session: str, event: Metered) -> None:
        """Attribute ``event`` to the job that ran on ``session`` when it was made."""
        job, body = None, None
        with contextlib.suppress(ChorusError):
            ran = [
                j
                for j in await self.sup.store.list_jobs(session_id=session)
                if j.started_at is not None
                and j.started_at <= event.ts
                and (j.ended_at is None or j.ended_at >= event.ts - 1.0)
            ]
            if ran:
                latest = max(ran, key=lambda j: j.started_at or 0.0)
                job, body = latest.id, latest.body
        kept = self._keep(session, job, body, event)
        if kept is not None:
            await kept

    def _where(self, channel: str) -> tuple[str | None, str | None]:
        return (None, None) if channel == NO_SESSION else self.sup.running_on(channel)

    def _append(self, session: str, event: Metered) -> asyncio.Future[Event] | None:
        try:
            future = self.sup.store.append_nowait(session, event, origin=ORIGIN_CHORUS)
        except ChorusError as exc:  # the writer's queue full, the store closed
            log.warning("meter: a request of session %s was not logged: %s", session, exc)
            return None
        future.add_done_callback(_logged)
        return future

    # -- quota -----------------------------------------------------------------------------

    def _stated(self, record: dict[str, Any]) -> None:
        windows = {str(k): Window(**v) for k, v in dict(record.get("windows") or {}).items()}
        at = float(record.get("at") or time.time())
        api = str(record.get("api"))
        self.quotas.update(api, str(record.get("upstream")), windows, at)
        until = low_until(windows, self.sup.config.meter.reserve, at)
        for body in self.sup.router.bodies:
            if API_OF_CLI.get(cli_name(body)) == api:
                self.sup.health.low(self.sup.provider_key(body), until)

    # -- secrets ---------------------------------------------------------------------------

    def secrets(self) -> dict[str, str]:
        """The values to keep from the providers, by name: the vault's, then the
        credential-named ``[agents.*.env]`` ones."""
        if not self.sup.config.meter.hide_secrets:
            return {}
        found = {
            name: value
            for agent in self.sup.config.agents.values()
            for name, value in agent.env.items()
            if _CREDENTIAL.search(name)
        }
        store = self.sup.secrets
        if store is not None:
            try:
                found.update(store.items())
            except ChorusError as exc:
                log.warning("meter: the vault could not be read: %s", exc)
        return found

    def status(self) -> dict[str, Any]:
        return {"quota": self.quotas.snapshot(), "unmetered": unmetered(self.sup)}


def low_until(windows: Mapping[str, Window], reserve: float, at: float) -> float:
    """Until when ``windows`` leave at most ``reserve`` of a limit (0: none do)."""
    low = [
        w
        for w in windows.values()
        if w.limit and w.remaining is not None and w.remaining <= reserve * w.limit
    ]
    return max((w.reset_at or at + 60.0) for w in low) if low else 0.0


def unmetered(sup: Supervisor) -> dict[str, str]:
    """The routed bodies whose model calls cannot go through the meter, and why (their
    usage then comes from what the CLI reports)."""
    found: dict[str, str] = {}
    for body in sup.router.bodies:
        cli = cli_name(body)
        if cli not in API_OF_CLI:
            continue
        agent = sup.config.agents.get(cli)
        pointed = point_body(cli, {**os.environ, **(agent.env if agent else {})}, None)
        if not pointed.env and not pointed.args:
            found[body] = _WHY.get(cli, "its login does not take a base URL")
    return found


_WHY = {
    "codex": "Codex's built-in provider (ChatGPT login or its own API endpoint)",
    "gemini": "Gemini's Google login (its own endpoint)",
}


def _logged(future: asyncio.Future[Event]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("meter: a request was not logged: %s", exc)


def build_meter(sup: Supervisor) -> DaemonMeter | None:
    """The meter ``[meter]`` asks for (None: off): found or its port bound, at once."""
    if not sup.config.meter.enabled:
        return None
    meter = DaemonMeter(sup)
    channel_key()  # the meter's process checks tokens with it
    meter.host.open()
    sup.status_hooks.append(meter.status)
    return meter


def meter_routes(meter: DaemonMeter | None) -> dict[str, SessionRoute]:
    """Nothing of the meter is served on the channel's listener any more."""
    return {}


@contextlib.asynccontextmanager
async def metering(channel: Channel, meter: DaemonMeter | None) -> AsyncIterator[None]:
    """Point the bodies started in the block at the meter's process, linked to it."""
    if meter is None:
        yield
        return
    point = Channel(channel.host, meter.host.port, channel.key)
    open_meter(point)
    meter.host.start()
    try:
        yield
    finally:
        close_meter(point)
        await meter.host.close(keep=keep_flag().exists())
