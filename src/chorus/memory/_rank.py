"""Ranking, pure: the FTS5 query, reciprocal rank fusion, and salience.

A hit's score is ``rrf * recency * reinforcement * trust * importance``:

* ``rrf`` = Σ 1/(k + rank) over the lexical (BM25) and, when an embedder is
  configured, the vector ranking (k = 60, ranks from 1);
* ``recency`` = 0.25 + 0.75 · 0.5^(age / half-life): old things fade but never
  vanish; MEMORY.md does not decay (it is curated);
* ``reinforcement`` = 1 + 0.15 · log2(1 + times seen);
* ``trust`` by source kind (``chorus.memory._model.TRUST``);
* ``importance`` = 0.5 + importance (0..1, default 0.5 gives 1.0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from chorus.memory._model import TRUST

RRF_K = 60
DAY = 86_400.0


def words_of(text: str, max_terms: int = 32) -> list[str]:
    """The distinct words of a query, in order, case-folded."""
    return list(dict.fromkeys(w.casefold() for w in re.findall(r"\w+", text)))[:max_terms]


def fts_query(text: str, max_terms: int = 32) -> str | None:
    """An FTS5 query OR-ing the text's words, each quoted (no FTS syntax leaks
    through); ``None`` when the text has no word."""
    return or_query(words_of(text, max_terms))


def or_query(words: list[str]) -> str | None:
    return " OR ".join(f'"{w}"' for w in words) if words else None


def informative(words: list[str], doc_counts: dict[str, int], rows: int) -> list[str]:
    """Drop the words found in more than :data:`STOP_SHARE` of the rows (they rank
    nothing and make BM25 score most of the index); keep the rarest one if all are."""
    known = [w for w in words if doc_counts.get(w, 0) > 0]
    if rows < STOP_MIN_ROWS:
        return known
    kept = [w for w in known if doc_counts[w] <= STOP_SHARE * rows]
    if kept or not known:
        return kept
    return [min(known, key=lambda w: doc_counts[w])]


STOP_SHARE = 0.05
#: Below this many rows every word counts (a small memory has no stop words).
STOP_MIN_ROWS = 200


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion of ranked lists of refs."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, ref in enumerate(ranking, start=1):
            scores[ref] = scores.get(ref, 0.0) + 1.0 / (k + rank)
    return scores


def recency(age_s: float, half_life_days: float) -> float:
    decay: float = 0.5 ** (max(0.0, age_s) / (half_life_days * DAY))
    return 0.25 + 0.75 * decay


def reinforcement(count: int) -> float:
    return 1.0 + 0.15 * math.log2(1 + max(1, count))


def trust(source_kind: str) -> float:
    return TRUST.get(source_kind, 0.5)


def importance(value: float) -> float:
    return 0.5 + min(1.0, max(0.0, value))


def jaccard(a: str, b: str) -> float:
    """Word-set overlap of two texts (0..1), the similarity of the dedup step."""
    sa = set(re.findall(r"\w+", a.casefold()))
    sb = set(re.findall(r"\w+", b.casefold()))
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)
