"""Permission modes and approvals: Chorus's vocabulary mapped onto Codex's.

Codex has no permission modes, only an approval policy (when to ask) and a
sandbox (what may run unasked). :data:`MODE_POLICIES` is the mapping; the
approval helpers turn Codex's four approval requests into one
:class:`PermissionAsk` and a :class:`PermissionAnswer` back into the right
wire decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from chorus.bodies._permissions import PermissionAnswer, PermissionAsk
from chorus.bodies.codex import _schema as s
from chorus.bodies.codex._wire import to_wire
from chorus.events import JsonDict

BODY_NAME = "codex"


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """How one Chorus permission mode maps onto Codex's approval policy and sandbox.

    ``sandbox`` is the ``thread/start`` spelling, :attr:`sandbox_policy` the
    ``turn/start`` one. ``auto_accept_edits`` makes the body answer file-change
    approvals itself (Codex cannot tell "ask for commands" from "ask for edits").
    """

    approval_policy: Literal["untrusted", "on-request", "never"]
    sandbox: Literal["read-only", "workspace-write", "danger-full-access"]
    auto_accept_edits: bool = False

    @property
    def sandbox_policy(self) -> JsonDict:
        kind = {
            "read-only": "readOnly",
            "workspace-write": "workspaceWrite",
            "danger-full-access": "dangerFullAccess",
        }[self.sandbox]
        return {"type": kind}

    def sandbox_policy_for(self, roots: Sequence[str] = ()) -> JsonDict:
        """:attr:`sandbox_policy` with ``roots`` (the policy's allowed paths besides
        the folder) writable too, when the sandbox is the workspace one."""
        policy = self.sandbox_policy
        if roots and self.sandbox == "workspace-write":
            policy["writableRoots"] = list(roots)
        return policy


#: Chorus permission mode -> Codex settings.
#:
#: =================  ===============  ==================  ======================================
#: mode               approvalPolicy   sandbox             effect
#: =================  ===============  ==================  ======================================
#: default            untrusted        workspace-write     every non-trivial command and edit asks
#: acceptEdits        untrusted        workspace-write     as default, but edits are auto-accepted
#: plan               untrusted        read-only           nothing can write; commands Codex does
#:                                                         not know as safe ask (``sudo`` too)
#: bypassPermissions  never            danger-full-access  no sandbox, no questions
#: =================  ===============  ==================  ======================================
MODE_POLICIES: Mapping[str, ModePolicy] = {
    "default": ModePolicy("untrusted", "workspace-write"),
    "acceptEdits": ModePolicy("untrusted", "workspace-write", auto_accept_edits=True),
    # Not "never": Codex would run any command unasked in its read-only sandbox, and
    # a command that only reads as root there (``sudo ls``) would pass.
    "plan": ModePolicy("untrusted", "read-only"),
    "bypassPermissions": ModePolicy("never", "danger-full-access"),
}


def mode_policy(mode: str, *, contained: bool = False) -> ModePolicy:
    """The :class:`ModePolicy` of ``mode``; ``KeyError`` for an unknown mode.

    ``contained``: Chorus's OS sandbox already holds the CLI, so the workspace sandbox
    is not nested inside it (``danger-full-access``; the approval policy stays, so
    Chorus is still asked). Codex's own sandbox around each command costs 80-150 ms
    and takes the command's network, which Claude's and Gemini's commands keep: one
    boundary, Chorus's, for every body. Plan mode keeps its read-only sandbox."""
    policy = MODE_POLICIES[mode]
    if contained and policy.sandbox == "workspace-write":
        return replace(policy, sandbox="danger-full-access")
    return policy


ApprovalKind = Literal["command", "file_change", "legacy_command", "legacy_patch", "mcp_tool"]

#: Looks up the changes a fileChange item announced (the approval names only the item).
ChangesOf = Callable[[str], list[JsonDict]]


def _ask_command(params: Any, changes_of: ChangesOf) -> tuple[ApprovalKind, PermissionAsk]:
    p = s.CommandExecutionRequestApprovalParams.model_validate(params)
    command = p.command or ""
    ask = PermissionAsk(
        body=BODY_NAME,
        tool="shell",
        native_tool="commandExecution",
        input={"command": command, "cwd": p.cwd, "reason": p.reason},
        call_id=p.itemId,
        description=p.reason or command,
        cwd=p.cwd,
    )
    return "command", ask


def _ask_file_change(params: Any, changes_of: ChangesOf) -> tuple[ApprovalKind, PermissionAsk]:
    p = s.FileChangeRequestApprovalParams.model_validate(params)
    changes = changes_of(p.itemId)
    paths = tuple(str(c.get("path")) for c in changes)
    ask = PermissionAsk(
        body=BODY_NAME,
        tool="edit",
        native_tool="fileChange",
        input={"changes": changes, "reason": p.reason, "grant_root": p.grantRoot},
        call_id=p.itemId,
        description=p.reason or f"edit {', '.join(paths)}",
        paths=paths,
    )
    return "file_change", ask


def _ask_legacy_command(params: Any, changes_of: ChangesOf) -> tuple[ApprovalKind, PermissionAsk]:
    p = s.ExecCommandApprovalParams.model_validate(params)
    command = " ".join(p.command)
    ask = PermissionAsk(
        body=BODY_NAME,
        tool="shell",
        native_tool="execCommand",
        input={"command": command, "argv": p.command, "cwd": p.cwd, "reason": p.reason},
        call_id=p.callId,
        description=p.reason or command,
        cwd=p.cwd,
    )
    return "legacy_command", ask


def _ask_legacy_patch(params: Any, changes_of: ChangesOf) -> tuple[ApprovalKind, PermissionAsk]:
    p = s.ApplyPatchApprovalParams.model_validate(params)
    changes = [{"path": path, **to_wire(change)} for path, change in p.fileChanges.items()]
    paths = tuple(p.fileChanges)
    ask = PermissionAsk(
        body=BODY_NAME,
        tool="edit",
        native_tool="apply_patch",
        input={"changes": changes, "reason": p.reason, "grant_root": p.grantRoot},
        call_id=p.callId,
        description=p.reason or f"edit {', '.join(paths)}",
        paths=paths,
    )
    return "legacy_patch", ask


class _McpApproval(BaseModel):
    """``mcpServer/elicitation/request`` as Codex sends it to approve an MCP tool call
    (``_meta.codex_approval_kind == "mcp_tool_call"``); other elicitations do not fit."""

    server: str = Field(alias="serverName")
    message: str = ""
    meta: dict[str, Any] = Field(alias="_meta")

    @model_validator(mode="after")
    def _is_tool_approval(self) -> _McpApproval:
        if self.meta.get("codex_approval_kind") != "mcp_tool_call":
            raise ValueError("not an MCP tool approval")
        return self


def _ask_mcp_tool(params: Any, changes_of: ChangesOf) -> tuple[ApprovalKind, PermissionAsk]:
    p = _McpApproval.model_validate(params)
    tool = str(p.meta.get("tool_name", ""))
    args = p.meta.get("tool_params")
    ask = PermissionAsk(
        body=BODY_NAME,
        tool="mcp",
        native_tool=f"mcp__{p.server}__{tool}",
        input=args if isinstance(args, dict) else {},
        description=p.message or f"{p.server}: {tool}",
    )
    return "mcp_tool", ask


_ASKS: dict[str, Callable[[Any, ChangesOf], tuple[ApprovalKind, PermissionAsk]]] = {
    "item/commandExecution/requestApproval": _ask_command,
    "item/fileChange/requestApproval": _ask_file_change,
    "execCommandApproval": _ask_legacy_command,
    "applyPatchApproval": _ask_legacy_patch,
    "mcpServer/elicitation/request": _ask_mcp_tool,
}

#: The server requests answered through the permission callback.
APPROVAL_METHODS = frozenset(_ASKS)


def permission_ask(
    method: str, params: Any, changes_of: ChangesOf
) -> tuple[ApprovalKind, PermissionAsk]:
    """The :class:`PermissionAsk` for approval request ``method`` (one of
    :data:`APPROVAL_METHODS`); ``ValidationError`` if ``params`` do not fit the schema."""
    return _ASKS[method](params, changes_of)


def decision_payload(kind: ApprovalKind, answer: PermissionAnswer) -> JsonDict:
    """The ``result`` object answering an approval of ``kind``.

    v2 approvals take ``accept`` / ``acceptForSession`` / ``decline`` / ``cancel``
    (a decline carries no reason on the wire); the legacy ones take
    ``approved`` / ``approved_for_session`` / ``{"denied": {"rejection": reason}}`` /
    ``abort``. ``answer.extra["interrupt"]`` picks ``cancel`` / ``abort`` (deny
    and end the turn). Each payload is validated against the generated model.
    """
    interrupt = bool(answer.extra.get("interrupt"))
    session = answer.scope == "session"
    model: type[BaseModel]
    if kind == "mcp_tool":
        if answer.decision == "allow":
            return {"action": "accept", "content": {}}
        return {"action": "cancel" if interrupt else "decline", "content": None}
    if kind in ("command", "file_change"):
        if answer.decision == "allow":
            decision: Any = "acceptForSession" if session else "accept"
        else:
            decision = "cancel" if interrupt else "decline"
        model = (
            s.CommandExecutionRequestApprovalResponse
            if kind == "command"
            else s.FileChangeRequestApprovalResponse
        )
    else:
        if answer.decision == "allow":
            decision = "approved_for_session" if session else "approved"
        elif interrupt:
            decision = "abort"
        else:
            decision = {"denied": {"rejection": answer.reason or "denied by Chorus"}}
        model = (
            s.ExecCommandApprovalResponse
            if kind == "legacy_command"
            else s.ApplyPatchApprovalResponse
        )
    return to_wire(model.model_validate({"decision": decision}))
