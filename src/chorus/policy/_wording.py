"""What a model is told when the policy refuses it: one wording, for every body.

Every refusal names the rule that decided and why, behind the same mark, whether
it reaches the model in the tool result (Chorus's answer to a permission ask,
Gemini's policy file, a denied program's stub in the sandbox) or later (a steered
message, the next prompt: :func:`denial_notice`). The log's permission decisions
carry the same text.
"""

from __future__ import annotations

from collections.abc import Iterable

#: What every refusal the policy makes starts with.
POLICY_MARK = "[Chorus policy]"
_ADVICE = "Do not retry it or work around it; choose another approach or ask the user."


def denial_text(rule: str, reason: str, tool: str | None = None) -> str:
    """The refusal of one call: ``[Chorus policy] denied this shell call
    [shell.denied_command]: <reason>. Do not retry it ...``."""
    what = f"this {tool} call" if tool else "this call"
    return f"{POLICY_MARK} denied {what} [{rule}]: {reason.rstrip('. ')}. {_ADVICE}"


def denial_notice(reasons: Iterable[str]) -> str:
    """The message that tells the model about refusals it was not told of in the
    tool result (a steered message, or the front of the next prompt)."""
    listed = "\n".join(f"- {reason}" for reason in reasons)
    return (
        f"{POLICY_MARK} These actions were denied and will stay denied; do not retry "
        f"them, find another way or say why you cannot:\n{listed}"
    )


def is_told(text: str, rule: str) -> bool:
    """Whether ``text`` (what the model saw) carries the policy's refusal by ``rule``."""
    return POLICY_MARK in text and f"[{rule}]" in text
