"""The price table: shipped as data, the longest prefix wins, the person's overrides
win over it, and each kind of token costs its own rate."""

from __future__ import annotations

import tomllib

import pytest

from chorus.events import Usage
from chorus.meter import PRICES_FILE, Price, price_table


def test_the_shipped_table_prices_each_cli_s_models() -> None:
    table = price_table()
    assert table.price("claude-sonnet-4-5-20250929") == table.prices["claude-sonnet"]
    assert table.price("claude-opus-4-1-20250805") == table.prices["claude-opus-4-1"]
    assert table.price("claude-opus-4-20250514") == table.prices["claude-opus-4-20"]
    assert table.price("claude-opus-4-5") == table.prices["claude-opus"]
    assert table.price("gpt-5-mini-2025-08-07") == table.prices["gpt-5-mini"]
    assert table.price("gpt-5.5") == table.prices["gpt-5"]  # a newer model: its family
    assert table.price("models/gemini-2.5-flash") == table.prices["gemini-2.5-flash"]
    assert table.price("gemini-2.5-flash-lite") == table.prices["gemini-2.5-flash-lite"]
    assert table.price("llama-3") is None
    assert table.cost("llama-3", Usage(input_tokens=5)) is None


def test_every_entry_has_input_and_output_rates() -> None:
    data = tomllib.loads(PRICES_FILE.read_text())
    assert all({"input", "output"} <= set(fields) for fields in data.values())


def test_overrides_replace_an_entry_and_add_new_models() -> None:
    table = price_table(
        {"gpt-5": {"input": 2.0, "output": 4.0}, "my-model": {"input": 1.0, "output": 1.0}}
    )
    assert table.prices["gpt-5"] == Price(input=2.0, output=4.0)
    assert table.cost("my-model-v2", Usage(input_tokens=1_000_000)) == 1.0


def test_cached_and_cache_written_tokens_cost_their_own_rates() -> None:
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    usage = Usage(
        input_tokens=1_400_000,
        cached_input_tokens=1_000_000,
        cache_write_input_tokens=100_000,
        output_tokens=200_000,
    )
    assert price.cost(usage) == pytest.approx(0.3 * 3.0 + 0.3 + 0.375 + 0.2 * 15.0)
    plain = Price(input=2.0, output=8.0)  # no cache rates: input's
    assert plain.cost(Usage(input_tokens=10, cached_input_tokens=10)) == pytest.approx(20e-6)


def test_a_bad_override_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="price of 'x'"):
        price_table({"x": {"input": "cheap", "output": 1}})
