"""Gateway metrics on ``prometheus_client``, in one registry the daemon shares.

Label values come only from bounded sets (known subtypes, configured body
names, ``"unknown"`` for anything else), so a brain cannot grow the series
count by inventing subtypes. The thin wrappers keep the call sites short
(``metrics.requests_total.inc(subtype, body)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import prometheus_client
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from chorus.events import KNOWN_SUBTYPES

# One series per counter, not two: the ``_created`` timestamps say nothing here.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: ``generate_latest`` writes the 0.0.4 text format (what every scraper reads).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: Control-response latency buckets in milliseconds.
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 120000,
)  # fmt: skip


def subtype_label(subtype: str) -> str:
    """The subtype itself when UCP v1 defines it, else ``"unknown"`` (bounded cardinality)."""
    return subtype if subtype in KNOWN_SUBTYPES else "unknown"


class Counter:
    """A prometheus counter taking its label values positionally."""

    def __init__(
        self, registry: CollectorRegistry, name: str, help_text: str, labels: Sequence[str] = ()
    ) -> None:
        self.name = name
        self._labelled = bool(labels)
        self._inner = prometheus_client.Counter(name, help_text, labels, registry=registry)
        self._registry = registry

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        (self._inner.labels(*labels) if self._labelled else self._inner).inc(amount)

    def value(self, *labels: str) -> float:
        names = self._inner._labelnames
        found = self._registry.get_sample_value(self.name, dict(zip(names, labels, strict=True)))
        return found or 0.0


class Histogram:
    """A prometheus histogram taking the value, then its label values."""

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_MS,
    ) -> None:
        self.name = name
        self._inner = prometheus_client.Histogram(
            name, help_text, labels, registry=registry, buckets=buckets
        )
        self._registry = registry

    def observe(self, value: float, *labels: str) -> None:
        self._inner.labels(*labels).observe(value)

    def count(self, *labels: str) -> int:
        names = self._inner._labelnames
        found = self._registry.get_sample_value(
            self.name + "_count", dict(zip(names, labels, strict=True))
        )
        return int(found or 0)


class GatewayMetrics:
    """Every gateway metric; :meth:`render` is the ``/metrics`` body (with whatever
    else was registered in :attr:`registry`, e.g. the daemon's job metrics)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r, prefix = self.registry, "chorus_gateway_"
        self.requests_total = Counter(
            r,
            prefix + "requests_total",
            "Control requests admitted (past the rate limit and the pending cap).",
            ("subtype", "body"),
        )
        self.control_response_latency_ms = Histogram(
            r,
            prefix + "control_response_latency_ms",
            "Time from receiving a control request to queuing its response, in ms.",
            ("subtype",),
        )
        self.reconnect_attempts_total = Counter(
            r, prefix + "reconnect_attempts_total", "Dials to a brain after the first one."
        )
        self.policy_denials_total = Counter(
            r, prefix + "policy_denials_total", "Requests the policy hook refused.", ("subtype",)
        )
        self.unsupported_subtype_total = Counter(
            r,
            prefix + "unsupported_subtype_total",
            "Requests answered unsupported (unknown subtype or not supported by the body).",
            ("subtype", "body"),
        )
        self.rejected_frames_total = Counter(
            r, prefix + "rejected_frames_total", "Inbound frames refused, by error code.", ("code",)
        )

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Expose ``read()`` as gauge ``chorus_gateway_<name>``."""
        gauge = prometheus_client.Gauge("chorus_gateway_" + name, help_text, registry=self.registry)
        gauge.set_function(read)

    def render(self) -> str:
        return generate_latest(self.registry).decode()
