"""Replay: re-normalize a session's recorded stdout and check it against the log.

A session's raw stdout lines are fed, in order, to a fresh codec; the events it
produces are compared one by one with the logged events of origin ``codec``,
ignoring what the store stamps (``session_id``, ``seq``, ``ts``, ``body``). The
report names the first divergence. The same check re-normalizes old sessions
with a newer codec: a divergence there shows what the new codec changes.

Codecs plug in by body name with :func:`register_replay_codec` (the store never
imports bodies: whoever runs a replay registers them first, e.g. the CLI with
``chorus.bodies.replay_codecs``), or the caller passes a factory.

A codec for a request/response protocol (Codex app-server, ACP) must also see
what Chorus wrote to the agent, to pair answers with requests: a codec with a
``sent`` method (:class:`DuplexReplayCodec`) is given the session's stdin lines
too, in their recorded order, and the events ``sent`` returns are compared like
the others. A codec's ``not_compared`` fields (e.g. a duration the body timed
itself) are left out of the comparison.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chorus._errors import ChorusError
from chorus.events import Event
from chorus.store._errors import NoReplayCodecError
from chorus.store._interface import Store
from chorus.store._origin import event_origin
from chorus.store._records import ORIGIN_CODEC, JsonDict, RawLine, RawStream
from chorus.store._redact import Redactor

#: Fed one raw stdout line, returns the events it produces (possibly none).
ReplayCodec = Callable[[str], Iterable[Event]]
#: Returns a fresh codec (codecs are stateful: one per replay).
CodecFactory = Callable[[], ReplayCodec]


@runtime_checkable
class DuplexReplayCodec(Protocol):
    """A replay codec that also reads what Chorus wrote to the agent's stdin."""

    #: Event fields the recorded lines cannot reproduce (a duration the body timed,
    #: a setting Chorus chose that the wire spells ambiguously); not compared.
    not_compared: frozenset[str]

    def __call__(self, line: str) -> Iterable[Event]: ...

    def sent(self, line: str) -> Iterable[Event]:
        """Take note of one line written to the agent; events it implies, if any."""
        ...


#: Fields the store stamps on append; replay does not compare them.
#: Set by the session and the daemon around the codec, not by the codec itself.
STAMPED_FIELDS = frozenset(
    {"session_id", "seq", "ts", "body", "job_id", "native_session_id", "turn_id"}
)
_PAGE = 1000

_registry: dict[str, CodecFactory] = {}
_registry_lock = threading.Lock()


def register_replay_codec(body: str, factory: CodecFactory) -> None:
    """Make ``factory`` the replay codec of ``body`` (a later call replaces it)."""
    with _registry_lock:
        _registry[body] = factory


def replay_codec_factory(body: str) -> CodecFactory:
    """The registered factory for ``body``. Raises :class:`NoReplayCodecError`."""
    with _registry_lock:
        factory = _registry.get(body)
    if factory is None:
        raise NoReplayCodecError(body)
    return factory


def comparable(event: Event, ignored: frozenset[str] = frozenset()) -> JsonDict:
    """The event as JSON without the fields the store stamps (nor ``ignored`` ones)."""
    data: JsonDict = event.model_dump(mode="json")
    skip = STAMPED_FIELDS | ignored
    return {key: value for key, value in data.items() if key not in skip}


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first event where the replay differs from the log.

    ``index`` counts compared events from 0; ``expected`` is the logged event
    (None: the replay produced more), ``got`` the replayed one (None: it produced
    fewer); ``raw_n`` is the raw line being replayed; ``error`` is set when the
    codec raised instead.
    """

    index: int
    expected: JsonDict | None
    got: JsonDict | None
    seq: int | None = None
    raw_n: int | None = None
    error: str | None = None

    @property
    def fields(self) -> list[str]:
        """Top-level fields whose values differ (all of them if one side is missing)."""
        left, right = self.expected or {}, self.got or {}
        return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))

    def describe(self) -> str:
        where = f"event #{self.index}"
        if self.seq is not None:
            where += f" (logged seq {self.seq})"
        if self.raw_n is not None:
            where += f" from raw line {self.raw_n}"
        if self.error is not None:
            return f"{where}: the codec failed: {self.error}"
        return (
            f"{where}: fields differ: {', '.join(self.fields)}\n"
            f"  expected: {self.expected}\n  got:      {self.got}"
        )


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The outcome of :func:`replay`; ``ok`` when every event matched."""

    session_id: str
    body: str
    raw_lines: int
    compared: int
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def describe(self) -> str:
        head = (
            f"session {self.session_id} ({self.body}): {self.raw_lines} raw stdout lines, "
            f"{self.compared} events matched"
        )
        if self.divergence is None:
            return f"{head}; replay matches the log"
        return f"{head}; first divergence at {self.divergence.describe()}"


async def replay(
    store: Store,
    session_id: str,
    codec_factory: CodecFactory | None = None,
    *,
    redactor: Redactor | None = None,
) -> ReplayReport:
    """Replay ``session_id``'s stdout through a fresh codec and compare with the log.

    ``codec_factory`` defaults to the one registered for the session's body.
    Replayed events pass through ``redactor`` (default: the store's) like the
    logged ones did. Raises :class:`UnknownSessionError`, :class:`NoReplayCodecError`.
    """
    session = await store.get_session(session_id)
    codec = (codec_factory or replay_codec_factory(session.body))()
    duplex = isinstance(codec, DuplexReplayCodec)
    ignored = codec.not_compared if isinstance(codec, DuplexReplayCodec) else frozenset()
    check = _Comparison(store, session_id, redactor or store.redactor, ignored)
    streams: list[RawStream] = ["stdout", "stdin"] if duplex else ["stdout"]
    async with aclosing(_raw_lines(store, session_id, streams)) as lines:
        async for raw in lines:
            if not await check.feed(codec, raw):
                break
        else:
            await check.finish()
    return ReplayReport(session_id, session.body, check.raw_lines, check.index, check.divergence)


class _Comparison:
    """Walks the logged codec events in step with the replayed ones."""

    def __init__(
        self, store: Store, session_id: str, redactor: Redactor, ignored: frozenset[str]
    ) -> None:
        self._ignored = ignored
        self._store = store
        self._session_id = session_id
        self._redactor = redactor
        self._logged: list[Event] = []
        self._next_seq = 1
        self.index = 0
        self.raw_lines = 0
        self.divergence: Divergence | None = None

    async def feed(self, codec: ReplayCodec, raw: RawLine) -> bool:
        """Compare the events of one raw line; False once a divergence is found."""
        self.raw_lines += 1
        try:
            if raw.stream == "stdin":
                assert isinstance(codec, DuplexReplayCodec)
                produced = list(codec.sent(raw.line))
            else:
                produced = list(codec(raw.line))
        except ChorusError as exc:
            logged = await self._next_logged()
            self._diverge(logged, None, raw_n=raw.n, error=str(exc))
            return False
        for event in produced:
            if event_origin(event) != ORIGIN_CODEC:
                continue  # logged as Chorus's own (e.g. a Notice the codec decoded)
            got = comparable(self._redactor.redact_event(event), self._ignored)
            logged = await self._next_logged()
            if logged is None or comparable(logged, self._ignored) != got:
                self._diverge(logged, got, raw_n=raw.n)
                return False
            self.index += 1
        return True

    async def finish(self) -> None:
        """After the last raw line: any logged event left over is a divergence."""
        logged = await self._next_logged()
        if logged is not None:
            self._diverge(logged, None)

    def _diverge(self, logged: Event | None, got: JsonDict | None, **extra: Any) -> None:
        expected = None if logged is None else comparable(logged, self._ignored)
        seq = None if logged is None else logged.seq
        self.divergence = Divergence(self.index, expected, got, seq=seq, **extra)

    async def _next_logged(self) -> Event | None:
        if not self._logged:
            self._logged = await self._store.read_events(
                self._session_id, from_seq=self._next_seq, limit=_PAGE, origin=ORIGIN_CODEC
            )
            self._logged.reverse()  # pop() from the end is O(1)
        if not self._logged:
            return None
        event = self._logged.pop()
        self._next_seq = event.seq + 1
        return event


async def _raw_lines(
    store: Store, session_id: str, streams: list[RawStream]
) -> AsyncGenerator[RawLine, None]:
    from_n = 1
    while True:
        page = await store.read_raw(session_id, streams=streams, from_n=from_n, limit=_PAGE)
        for raw in page:
            yield raw
        if len(page) < _PAGE:
            return
        from_n = page[-1].n + 1
