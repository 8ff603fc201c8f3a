"""What each body can do, per control: native, emulated, or unsupported."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum


class Support(StrEnum):
    NATIVE = "native"
    EMULATED = "emulated"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Declared per body class. The gateway answers an ``unsupported`` control with a
    deterministic error and a compatibility warning."""

    interrupt: Support
    set_model: Support
    set_permission_mode: Support
    max_thinking_tokens: Support
    steer: Support
    permission_callback: Support
    resume: Support
    fork: Support
    usage: Support
    cost: Support
    rate_limit_signal: Support
    mcp_status: Support = Support.UNSUPPORTED
    #: How the model learns the policy's rule and reason for a refused call:
    #: ``native`` in the tool result, in the same turn; ``emulated`` by a message
    #: Chorus adds within the turn (a steer, a prompt again); ``unsupported`` with
    #: the next prompt (a one-shot body whose CLI refuses in its own words).
    denial_reason: Support = Support.EMULATED

    def as_dict(self) -> dict[str, str]:
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}

    def supports(self, control: str) -> bool:
        value = getattr(self, control, Support.UNSUPPORTED)
        return bool(value != Support.UNSUPPORTED)
