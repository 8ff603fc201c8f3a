"""A fast heuristic classifier of jobs on two axes (the routing matrix's keys).

Kind: deep reasoning, structured execution, or creative work.
Load: token-light, token-heavy, or iterative.
The heuristic is keyword and size based; it is deliberately cheap so routing
never costs a model call unless the caller asks for one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class TaskKind(StrEnum):
    DEEP_REASONING = "deep_reasoning"
    STRUCTURED_EXECUTION = "structured_execution"
    CREATIVE = "creative"


class TaskLoad(StrEnum):
    TOKEN_LIGHT = "token_light"
    TOKEN_HEAVY = "token_heavy"
    ITERATIVE = "iterative"


@dataclass(frozen=True, slots=True)
class Classification:
    kind: TaskKind
    load: TaskLoad
    scores: dict[str, int]


_KIND_WORDS: dict[TaskKind, tuple[str, ...]] = {
    TaskKind.DEEP_REASONING: (
        "why",
        "debug",
        "design",
        "architect",
        "analy",
        "prove",
        "reason",
        "root cause",
        "investigate",
        "trade-off",
        "tradeoff",
        "explain",
        "review",
        "algorithm",
        "race",
    ),
    TaskKind.STRUCTURED_EXECUTION: (
        "rename",
        "format",
        "migrate",
        "convert",
        "add test",
        "run ",
        "install",
        "update",
        "bump",
        "replace",
        "lint",
        "fix typo",
        "generate",
        "refactor",
        "move ",
        "delete",
    ),
    TaskKind.CREATIVE: (
        "write a story",
        "poem",
        "brainstorm",
        "name ideas",
        "slogan",
        "creative",
        "blog",
        "tagline",
        "invent",
        "imagine",
        "draft",
        "copy for",
    ),
}
_ITERATIVE = ("until", "iterate", "loop", "keep trying", "each file", "every file", "all tests")
_HEAVY = ("whole repo", "entire codebase", "all files", "large", "logs", "dataset", "summarize")


def _count(words: tuple[str, ...], text: str) -> int:
    return sum(text.count(w) for w in words)


def classify(prompt: str) -> Classification:
    """Classify ``prompt``. Ties go to structured execution (the cheapest default)."""
    text = prompt.lower()
    scores = {kind.value: _count(words, text) for kind, words in _KIND_WORDS.items()}
    best = max(TaskKind, key=lambda k: (scores[k.value], k is TaskKind.STRUCTURED_EXECUTION))
    kind = best if scores[best.value] > 0 else TaskKind.STRUCTURED_EXECUTION
    if _count(_ITERATIVE, text):
        load = TaskLoad.ITERATIVE
    elif _count(_HEAVY, text) or len(re.findall(r"\S+", prompt)) > 400:
        load = TaskLoad.TOKEN_HEAVY
    else:
        load = TaskLoad.TOKEN_LIGHT
    return Classification(kind=kind, load=load, scores=scores)
