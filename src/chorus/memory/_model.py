"""Memory records: typed items and search hits (the ``[memory]`` settings: ``chorus.config``)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from chorus._errors import UserError

ItemKind = Literal["profile", "preference", "decision", "fact", "event", "procedure"]
ITEM_KINDS: tuple[str, ...] = get_args(ItemKind)
#: Who said it: the person (CLI), a body through the ``memory_write`` tool, the
#: extraction run at job end, or an import. Trust ranks them in that order.
SourceKind = Literal["user", "import", "agent", "extraction"]
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
ItemStatus = Literal["active", "superseded", "forgotten"]
ITEM_STATUSES: tuple[str, ...] = get_args(ItemStatus)

#: Trust by source kind (a multiplier of the search score): recalled prose written
#: by a model never ranks as high as what the person said.
TRUST: dict[str, float] = {"user": 1.0, "import": 0.9, "agent": 0.8, "extraction": 0.6}
#: The sources whose text a model wrote: shown to later bodies as quoted data, never
#: as instructions (:func:`chorus.memory.item_line`).
AGENT_SOURCES: frozenset[str] = frozenset({"agent", "extraction"})


class MemoryInputError(UserError):
    """Bad input to the memory (unknown kind, empty text, unknown id)."""


def normalize_text(text: str) -> str:
    """The text as compared for duplicates: NFKC, case-folded, single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", folded))


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One typed memory item; its file under ``memory/items/`` is the truth.

    ``session_id``, ``job_id`` and ``body`` say who wrote an agent's item (the
    session, job and body of the ``memory_write`` call or of the extracted job)."""

    id: str
    kind: str
    text: str
    status: str = "active"
    importance: float = 0.5
    reinforcement: int = 1
    source_kind: str = "user"
    source_event: str | None = None
    session_id: str | None = None
    created: float = 0.0
    last_seen: float = 0.0
    supersedes: str | None = None
    superseded_by: str | None = None
    job_id: str | None = None
    body: str | None = None

    @property
    def hash(self) -> str:
        return content_hash(self.text)

    @property
    def agent_written(self) -> bool:
        """A model wrote the text (a body's ``memory_write``, the extraction run)."""
        return self.source_kind in AGENT_SOURCES

    def but(self, **changes: Any) -> MemoryItem:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def check_kind(kind: str) -> str:
    if kind not in ITEM_KINDS:
        raise MemoryInputError(f"unknown memory type {kind!r}; use one of {', '.join(ITEM_KINDS)}")
    return kind


def check_text(text: str) -> str:
    clean = text.strip()
    if not clean:
        raise MemoryInputError("the memory text is empty")
    if len(clean) > MAX_ITEM_CHARS:
        raise MemoryInputError(
            f"the memory text is {len(clean)} characters; the limit is {MAX_ITEM_CHARS}"
            " (put long material in a daily note or MEMORY.md)"
        )
    return clean


MAX_ITEM_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result. ``ref`` is ``item:<id>`` or ``<file>#L<line>`` for notes."""

    ref: str
    source: Literal["item", "memory_md", "daily"]
    text: str
    score: float
    item: MemoryItem | None = None
    path: str | None = None
    line: int | None = None
    why: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ref": self.ref,
            "source": self.source,
            "text": self.text,
            "score": round(self.score, 6),
            "why": {k: round(v, 6) for k, v in self.why.items()},
        }
        if self.item is not None:
            out["item"] = self.item.to_dict()
        if self.path is not None:
            out["path"], out["line"] = self.path, self.line
        return out
