"""The settings of the ``[memory]`` table of ``config.toml`` (the memory package uses
them; they live here so that the config validates its own tables)."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chorus._errors import ConfigError


class MemorySettings(BaseModel):
    """The ``[memory]`` table of ``config.toml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``none`` (BM25 only, the default: offline, no weights) or ``hashing`` (a
    #: deterministic feature-hashing embedder, for tests and experiments).
    embedder: Literal["none", "hashing"] = "none"
    #: Days of daily notes put in every context (today included).
    daily_days: int = Field(default=7, ge=0, le=366)
    #: Relevant items put in every context.
    top_n: int = Field(default=8, ge=0, le=100)
    #: Recency half-life of the salience score, in days.
    half_life_days: float = Field(default=30.0, gt=0)
    #: Token budget of the assembled context (about 4 characters a token).
    context_tokens: int = Field(default=8000, ge=200, le=200_000)
    #: Extract memory items from each finished job with a one-shot body run
    #: (when the config does not say, ``CHORUS_MEMORY_EXTRACTION=0``/``1`` decides).
    extraction: bool = True
    #: Also extract from failed jobs (off: a failed job's talk is often wrong).
    extract_failed: bool = False
    #: Body of the extraction run (default: the one-shot mode of the job's body).
    extraction_body: str | None = None
    extraction_model: str | None = None
    #: Items whose word sets overlap this much (Jaccard) are one item, reinforced.
    dedup_similarity: float = Field(default=0.8, gt=0, le=1)


#: Environment variable that turns extraction on or off where the config is silent.
EXTRACTION_ENV = "CHORUS_MEMORY_EXTRACTION"
_SWITCH = {"0": False, "false": False, "off": False, "1": True, "true": True, "on": True}


def memory_settings(table: dict[str, Any] | None) -> MemorySettings:
    """Validate the ``[memory]`` table; a bad key raises :class:`ConfigError`."""
    table = dict(table or {})
    forced = os.environ.get(EXTRACTION_ENV, "").strip().lower()
    if forced in _SWITCH:
        table.setdefault("extraction", _SWITCH[forced])
    try:
        return MemorySettings.model_validate(table)
    except ValidationError as exc:
        problems = "; ".join(
            f"memory.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(problems) from exc
