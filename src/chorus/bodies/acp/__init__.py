"""Any agent that speaks the Agent Client Protocol (ACP) as a Chorus body.

The codec (:class:`AcpCodec`) is sans-I/O and testable on recorded lines; the
body (:class:`AcpBody`) runs it over the shared process transport. Agents come
from a registry of built-in entries (``gemini``, ``claude-code-acp``,
``codex-acp``) plus ``config.toml`` entries with ``protocol = "acp"``::

    async with open_acp_body("codex-acp", BodyOptions(cwd=work)) as body:
        async for event in body.turn("make out.txt"):
            ...
"""

from typing import TYPE_CHECKING, Any

from chorus.bodies.acp._errors import (
    AcpRpcError,
    AcpStateError,
    FsAccessError,
    classify_api_error,
    rpc_error_info,
)
from chorus.bodies.acp._fs import MAX_READ_BYTES, FileRoots
from chorus.bodies.acp._quirks import (
    CLAUDE_CODE_ACP_QUIRKS,
    CODEX_ACP_QUIRKS,
    GEMINI_QUIRKS,
    AcpQuirks,
)
from chorus.bodies.acp._registry import (
    ACP_CAPABILITIES,
    BUILTIN_AGENTS,
    GEMINI_ACP_CAPABILITIES,
    AcpAgent,
    acp_agent,
    acp_agents,
)

if TYPE_CHECKING:
    from chorus.bodies.acp._body import AcpBody, open_acp_body
    from chorus.bodies.acp._codec import (
        AcpCodec,
        FileReadRequested,
        FileWriteRequested,
        Inbound,
        Outgoing,
        PermissionRequested,
        RpcId,
        RpcReply,
        SessionState,
        choose_option,
        prompt_usage,
    )

#: The codec and the body load the ``acp`` package's schema (hundreds of pydantic
#: models: a second of start-up); the registry above does not, so listing agents,
#: checking a config and starting the daemon never pay for it. Loaded on first use.
_LAZY = {
    "AcpBody": "_body",
    "open_acp_body": "_body",
    **dict.fromkeys(
        (
            "AcpCodec",
            "FileReadRequested",
            "FileWriteRequested",
            "Inbound",
            "Outgoing",
            "PermissionRequested",
            "RpcId",
            "RpcReply",
            "SessionState",
            "choose_option",
            "prompt_usage",
        ),
        "_codec",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "ACP_CAPABILITIES",
    "BUILTIN_AGENTS",
    "CLAUDE_CODE_ACP_QUIRKS",
    "CODEX_ACP_QUIRKS",
    "GEMINI_ACP_CAPABILITIES",
    "GEMINI_QUIRKS",
    "MAX_READ_BYTES",
    "AcpAgent",
    "AcpBody",
    "AcpCodec",
    "AcpQuirks",
    "AcpRpcError",
    "AcpStateError",
    "FileReadRequested",
    "FileRoots",
    "FileWriteRequested",
    "FsAccessError",
    "Inbound",
    "Outgoing",
    "PermissionRequested",
    "RpcId",
    "RpcReply",
    "SessionState",
    "acp_agent",
    "acp_agents",
    "choose_option",
    "classify_api_error",
    "open_acp_body",
    "prompt_usage",
    "rpc_error_info",
]
