"""``--framework auto``: pick a framework from the task's class and wording, and say
why (the reason goes into the job's log)."""

from __future__ import annotations

from chorus.router import TaskKind, classify

_DATA_WORDS = ("csv", "json file", "dataset", "count ", "compute", "statistics", "parse ", "sum of")
_DIAGNOSE_WORDS = ("why does", "why is", "failing", "flaky", "root cause", "diagnose", "bug")


def pick(prompt: str, healthy: int) -> tuple[str, str]:
    """(framework, reason) for ``prompt`` with ``healthy`` bodies available."""
    text = prompt.lower()
    if any(word in text for word in _DIAGNOSE_WORDS):
        return "sequential", "the task asks for a diagnosis (hypothesis, test, observe)"
    if any(word in text for word in _DATA_WORDS):
        return "script", "the task is data or logic heavy (a throwaway script answers it)"
    kind = classify(prompt).kind
    if kind is TaskKind.DEEP_REASONING and healthy >= 2:
        return "consensus", f"deep reasoning with {healthy} healthy bodies to plan in parallel"
    if kind is TaskKind.DEEP_REASONING:
        return "reflect", "deep reasoning, but only one healthy body to plan"
    return "direct", f"{kind.value.replace('_', ' ')}: one body is enough"
