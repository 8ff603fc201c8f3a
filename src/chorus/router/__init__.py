"""Routing between bodies, provider health, and the failover handoff bundle."""

from chorus.router._check import MATRIX_CLASSES, STRATEGIES, check_routing
from chorus.router._classify import Classification, TaskKind, TaskLoad, classify
from chorus.router._handoff import (
    HandoffBundle,
    Step,
    TouchedFile,
    build_bundle,
    transcript_bundle,
)
from chorus.router._health import (
    CREDENTIAL_VARS,
    CooldownPolicy,
    HealthBook,
    ProviderHealth,
    provider_key,
)
from chorus.router._router import DEFAULT_MATRIX, Route, Router

__all__ = [
    "CREDENTIAL_VARS",
    "DEFAULT_MATRIX",
    "MATRIX_CLASSES",
    "STRATEGIES",
    "Classification",
    "CooldownPolicy",
    "HandoffBundle",
    "HealthBook",
    "ProviderHealth",
    "Route",
    "Router",
    "Step",
    "TaskKind",
    "TaskLoad",
    "TouchedFile",
    "build_bundle",
    "check_routing",
    "classify",
    "provider_key",
    "transcript_bundle",
]
