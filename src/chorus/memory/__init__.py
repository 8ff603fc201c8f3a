"""Chorus's memory: files are the truth, a SQLite index makes them searchable.

``CHORUS_HOME/memory/`` holds ``MEMORY.md`` (long-term, always in context),
``daily/YYYY-MM-DD.md`` (notes; the last days in context) and ``items/<id>.md``
(typed items: profile, preference, decision, fact, event, procedure). Search is
SQLite FTS5 BM25, optionally fused with vectors by reciprocal rank fusion, then
weighted by salience (recency, reinforcement, trust by source, importance).
Every write is also a :class:`chorus.events.MemoryChanged` in the event log.
An item a model wrote keeps who wrote it and is shown to later models as quoted
data (:func:`item_line`); the files are read without following links.
"""

from chorus.config import MemorySettings, memory_settings
from chorus.memory._embed import Embedder, HashingEmbedder, make_embedder
from chorus.memory._extract import (
    EXTRACTION_TIMEOUT_S,
    ONE_SHOT,
    Extracted,
    Extractions,
    Runner,
    apply_items,
    extract_job,
    extraction_prompt,
    parse_items,
    talk_of,
)
from chorus.memory._files import Layout, read_regular
from chorus.memory._log import MEMORY_SESSION, record_changes
from chorus.memory._memory import Memory, WriteResult
from chorus.memory._model import (
    AGENT_SOURCES,
    ITEM_KINDS,
    SOURCE_KINDS,
    TRUST,
    Hit,
    ItemKind,
    MemoryInputError,
    MemoryItem,
    content_hash,
)
from chorus.memory._quote import FENCE_BEGIN, FENCE_END, item_line, quoted_lines, written_by

__all__ = [
    "AGENT_SOURCES",
    "EXTRACTION_TIMEOUT_S",
    "FENCE_BEGIN",
    "FENCE_END",
    "ITEM_KINDS",
    "MEMORY_SESSION",
    "ONE_SHOT",
    "SOURCE_KINDS",
    "TRUST",
    "Embedder",
    "Extracted",
    "Extractions",
    "HashingEmbedder",
    "Hit",
    "ItemKind",
    "Layout",
    "Memory",
    "MemoryInputError",
    "MemoryItem",
    "MemorySettings",
    "Runner",
    "WriteResult",
    "apply_items",
    "content_hash",
    "extract_job",
    "extraction_prompt",
    "item_line",
    "make_embedder",
    "memory_settings",
    "parse_items",
    "quoted_lines",
    "read_regular",
    "record_changes",
    "talk_of",
    "written_by",
]
