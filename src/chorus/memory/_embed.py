"""Embedders: text to a unit vector, or nothing.

``none`` is the default: search is BM25 only, offline, with no model weights.
``hashing`` is a deterministic feature-hashing embedder (words and word pairs
hashed into a fixed number of signed buckets); it needs no weights and is what
the tests use. A real model is a later provider: weights are never downloaded
at run time.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from array import array
from typing import Protocol


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, text: str) -> array[float]: ...


class HashingEmbedder:
    """Signed feature hashing of words and adjacent word pairs, L2-normalized."""

    name = "hashing"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def embed(self, text: str) -> array[float]:
        vec = array("f", bytes(4 * self.dim))
        words = re.findall(r"\w+", text.casefold())
        for feature in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm:
            for i, x in enumerate(vec):
                vec[i] = x / norm
        return vec


def make_embedder(name: str) -> Embedder | None:
    """The configured embedder (``None`` for ``none``)."""
    return HashingEmbedder() if name == "hashing" else None


def to_blob(vec: array[float]) -> bytes:
    return vec.tobytes()


def from_blob(blob: bytes) -> array[float]:
    vec = array("f")
    vec.frombytes(blob)
    return vec


def dot(a: array[float], b: array[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=False))
