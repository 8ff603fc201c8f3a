"""Checks of ``[router]`` that need to know the bodies and the task classes: a
strategy, a body list or a matrix the router could never use is a config error
naming the key, not a setting silently ignored."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from chorus._errors import ConfigError
from chorus.router._classify import TaskKind, TaskLoad

STRATEGIES = ("smart", "round_robin")
#: Task classes a ``[router.matrix]`` key may name.
MATRIX_CLASSES = frozenset(k.value for k in TaskKind) | frozenset(k.value for k in TaskLoad)


def check_routing(
    strategy: str,
    bodies: Sequence[str],
    matrix: Mapping[str, Sequence[str]],
    known: Collection[str],
) -> None:
    """Raise :class:`ConfigError` for the first ``[router]`` key that cannot work."""
    names = ", ".join(known)
    for body in bodies:
        if body not in known:
            raise ConfigError(f"router.bodies: unknown body {body!r}; known bodies: {names}")
    only = strategy.removesuffix("_only")
    if strategy not in STRATEGIES and not (strategy.endswith("_only") and only in known):
        raise ConfigError(
            f"router.strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}"
            f" or <body>_only (bodies: {names})"
        )
    for cls, preferred in matrix.items():
        if cls not in MATRIX_CLASSES:
            classes = ", ".join(sorted(MATRIX_CLASSES))
            raise ConfigError(f"router.matrix.{cls}: unknown task class; one of {classes}")
        for body in preferred:
            if body not in known:
                raise ConfigError(f"router.matrix.{cls}: unknown body {body!r}")
