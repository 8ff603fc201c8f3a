"""The one builder of a session hub: the daemon's shared one, and a hub of its own for
a supervisor or a gateway used alone (tests, embedding)."""

from __future__ import annotations

from chorus.bodies import PermissionCallback, allow_all
from chorus.config import ChorusConfig, GatewaySettings, load_gateway_settings
from chorus.session._hub import HubLimits, SessionHub
from chorus.session._launcher import BodyFactory, BodyLauncher, PolicyGuards
from chorus.store import Store


def make_hub(
    config: ChorusConfig,
    store: Store,
    *,
    guards: PolicyGuards | None = None,
    factory: BodyFactory | None = None,
    permission: PermissionCallback = allow_all,
    settings: GatewaySettings | None = None,
    idle_timeout_s: float | None = None,
) -> SessionHub:
    """A hub whose launcher builds bodies under ``guards`` (None: no policy), with the
    daemon's idle timeout (or ``idle_timeout_s``), idle cap and spares, and the
    gateway's caps on what brains may open (``settings``: read from config.toml)."""
    launcher = BodyLauncher(config, store, guards=guards, factory=factory)
    return SessionHub(launcher, hub_limits(config, settings, idle_timeout_s), permission=permission)


def hub_limits(
    config: ChorusConfig,
    settings: GatewaySettings | None = None,
    idle_timeout_s: float | None = None,
) -> HubLimits:
    """The daemon's ``[daemon]`` limits and the gateway's ``[gateway]``/``[brain]`` ones."""
    settings = settings or load_gateway_settings()
    gateway, daemon = settings.gateway, config.daemon
    return HubLimits(
        idle_timeout_s=daemon.session_idle_timeout_s if idle_timeout_s is None else idle_timeout_s,
        max_idle=daemon.max_idle_bodies,
        max_sessions=gateway.max_sessions,
        max_queued=gateway.max_queued_messages,
        spares=daemon.spare_bodies,
        brain_authority=settings.brain.authority,
        allowed_cwds=tuple(gateway.allowed_cwds),
    )
