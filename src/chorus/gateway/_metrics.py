"""Gateway metrics in the Prometheus text exposition format (version 0.0.4), hand-rolled.

Label values come only from bounded sets (known subtypes, configured body
names, ``"unknown"`` for anything else), so a brain cannot grow the series
count by inventing subtypes. Everything runs on the event loop's thread.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence

from chorus.events import KNOWN_SUBTYPES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Control-response latency buckets in milliseconds.
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 120000,
)  # fmt: skip

LabelValues = tuple[str, ...]


def subtype_label(subtype: str) -> str:
    """The subtype itself when UCP v1 defines it, else ``"unknown"`` (bounded cardinality)."""
    return subtype if subtype in KNOWN_SUBTYPES else "unknown"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Counter:
    """A monotonically increasing count per label combination."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self._values: dict[LabelValues, float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if len(labels) != len(self.labelnames) or amount < 0:
            raise ValueError(f"{self.name}: labels {self.labelnames}, non-negative amount")
        self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(labels, 0.0)

    def samples(self) -> Iterable[str]:
        if not self.labelnames and not self._values:
            yield f"{self.name} 0"  # an unlabelled counter exists from the start
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_labels(self.labelnames, labels)} {_number(value)}"


class Gauge:
    """A value read at exposition time from a callback (e.g. live sessions)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.name = name
        self.help = help_text
        self._read = read

    def samples(self) -> Iterable[str]:
        yield f"{self.name} {_number(self._read())}"


class Histogram:
    """Observations counted into cumulative buckets, with their sum and count."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_MS,
    ) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[LabelValues, _Series] = {}

    def observe(self, value: float, *labels: str) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: labels {self.labelnames}")
        series = self._series.setdefault(labels, _Series(len(self.buckets)))
        series.add(bisect.bisect_left(self.buckets, value), value)

    def count(self, *labels: str) -> int:
        series = self._series.get(labels)
        return series.count if series is not None else 0

    def samples(self) -> Iterable[str]:
        for labels, series in sorted(self._series.items()):
            cumulative = 0
            for bound, hits in zip((*self.buckets, math.inf), series.hits, strict=True):
                cumulative += hits
                le = _labels(self.labelnames, labels, f'le="{_number(bound)}"')
                yield f"{self.name}_bucket{le} {cumulative}"
            plain = _labels(self.labelnames, labels)
            yield f"{self.name}_sum{plain} {_number(series.total)}"
            yield f"{self.name}_count{plain} {series.count}"


class _Series:
    __slots__ = ("count", "hits", "total")

    def __init__(self, buckets: int) -> None:
        self.hits = [0] * (buckets + 1)  # the last slot is +Inf
        self.count = 0
        self.total = 0.0

    def add(self, index: int, value: float) -> None:
        self.hits[index] += 1
        self.count += 1
        self.total += value


Metric = Counter | Gauge | Histogram


class GatewayMetrics:
    """Every gateway metric; :meth:`render` is the ``/metrics`` body."""

    def __init__(self) -> None:
        prefix = "chorus_gateway_"
        self.requests_total = Counter(
            prefix + "requests_total",
            "Control requests admitted (past the rate limit and the pending cap).",
            ("subtype", "body"),
        )
        self.control_response_latency_ms = Histogram(
            prefix + "control_response_latency_ms",
            "Time from receiving a control request to queuing its response, in ms.",
            ("subtype",),
        )
        self.reconnect_attempts_total = Counter(
            prefix + "reconnect_attempts_total", "Dials to a brain after the first one."
        )
        self.policy_denials_total = Counter(
            prefix + "policy_denials_total", "Requests the policy hook refused.", ("subtype",)
        )
        self.unsupported_subtype_total = Counter(
            prefix + "unsupported_subtype_total",
            "Requests answered unsupported (unknown subtype or not supported by the body).",
            ("subtype", "body"),
        )
        self.rejected_frames_total = Counter(
            prefix + "rejected_frames_total", "Inbound frames refused, by error code.", ("code",)
        )
        self._metrics: list[Metric] = [
            self.requests_total,
            self.control_response_latency_ms,
            self.reconnect_attempts_total,
            self.policy_denials_total,
            self.unsupported_subtype_total,
            self.rejected_frames_total,
        ]

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Expose ``read()`` as gauge ``chorus_gateway_<name>``."""
        self._metrics.append(Gauge("chorus_gateway_" + name, help_text, read))

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics:
            lines.append(f"# HELP {metric.name} {metric.help}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            lines.extend(metric.samples())
        return "\n".join(lines) + "\n"
