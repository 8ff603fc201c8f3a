"""The Codex CLI body: ``codex app-server`` JSON-RPC, with ``codex exec --json`` one-shot.

Public surface: the two bodies, their sans-I/O codecs (fed recorded lines in
tests), the permission-mode table and the error classification.
"""

from chorus.bodies.codex._body import (
    APP_SERVER_ARGS,
    EXEC_ARGS,
    OFFLINE_FLAGS,
    CodexBody,
    CodexExecBody,
)
from chorus.bodies.codex._codec import (
    ApprovalRequest,
    AppServerCodec,
    AutoReply,
    Inbound,
    Request,
    RpcResponse,
)
from chorus.bodies.codex._errors import CodexRequestError, classify_text, classify_turn_error
from chorus.bodies.codex._exec_codec import ExecCodec, rollout_wanted
from chorus.bodies.codex._policy import MODE_POLICIES, ModePolicy, mode_policy
from chorus.bodies.codex._rollout import RolloutTail, codex_home

__all__ = [
    "APP_SERVER_ARGS",
    "EXEC_ARGS",
    "MODE_POLICIES",
    "OFFLINE_FLAGS",
    "AppServerCodec",
    "ApprovalRequest",
    "AutoReply",
    "CodexBody",
    "CodexExecBody",
    "CodexRequestError",
    "ExecCodec",
    "Inbound",
    "ModePolicy",
    "Request",
    "RolloutTail",
    "RpcResponse",
    "classify_text",
    "classify_turn_error",
    "codex_home",
    "mode_policy",
    "rollout_wanted",
]
