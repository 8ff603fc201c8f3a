"""JSON helpers shared by the Codex codecs: compact lines, generated models as wire dicts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from chorus.events import JsonDict


def dumps(message: Mapping[str, Any]) -> str:
    """One compact JSON line (no newline; non-ASCII kept as is)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def to_wire(model: BaseModel) -> JsonDict:
    """A generated model as JSON: wire names, only the fields set, ``None`` left out."""
    data: JsonDict = model.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_unset=True
    )
    return data
