"""The price table: USD per million tokens per model, kept as data (``prices.toml``
beside this file), overridden per model or prefix by ``[meter.prices]``."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Counts(Protocol):
    """Token counts as :class:`chorus.events.Usage` names them (a Usage, or the meter's
    own tally of an answer)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_input_tokens(self) -> int: ...
    @property
    def cache_write_input_tokens(self) -> int: ...


PRICES_FILE = Path(__file__).with_name("prices.toml")
_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens; a missing cached or cache-write rate is the input rate."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Counts) -> float:
        """What ``usage`` costs (its input counts cached and cache-written tokens)."""
        cached, written = usage.cached_input_tokens, usage.cache_write_input_tokens
        fresh = max(0, usage.input_tokens - cached - written)
        total = (
            fresh * self.input
            + cached * _or(self.cached_input, self.input)
            + written * _or(self.cache_write, self.input)
            + usage.output_tokens * self.output
        )
        return total / _MILLION


#: Model names whose price is kept found (names come from the providers' answers).
_MAX_FOUND = 1024


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model name or prefix (the longest matching key wins)."""

    prices: Mapping[str, Price]
    #: Each model name's price once looked up (a model request each: not again).
    _found: dict[str, Price | None] = field(default_factory=dict, compare=False, repr=False)

    def price(self, model: str | None) -> Price | None:
        if not model:
            return None
        if model in self._found:
            return self._found[model]
        name = model.rsplit("/", 1)[-1]  # "models/gemini-2.5-flash"
        keys = [k for k in self.prices if name.startswith(k)]
        found = self.prices[max(keys, key=len)] if keys else None
        if len(self._found) < _MAX_FOUND:
            self._found[model] = found
        return found

    def cost(self, model: str | None, usage: Counts) -> float | None:
        """What ``usage`` of ``model`` costs; None for a model the table lacks."""
        price = self.price(model)
        return None if price is None else round(price.cost(usage), 10)


def price_table(overrides: Mapping[str, Mapping[str, Any]] | None = None) -> PriceTable:
    """The table shipped with Chorus, with ``overrides`` (``[meter.prices]``) on top."""
    data = tomllib.loads(PRICES_FILE.read_text(encoding="utf-8"))
    data.update({k: dict(v) for k, v in (overrides or {}).items()})
    return PriceTable({name: _price(name, fields) for name, fields in data.items()})


def _price(name: str, fields: Mapping[str, Any]) -> Price:
    try:
        return Price(**{k: float(v) for k, v in fields.items() if v is not None})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"price of {name!r}: {exc}") from exc
