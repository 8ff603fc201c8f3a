"""One policy for every body: permissions, risk, injection, audit, secrets.

Wiring a session (what the daemon does)::

    from chorus.policy import AuditLog, SecretStore, load_policy, policy_callback

    policy = load_policy()                          # CHORUS_HOME/policy.toml, made on first run
    secrets = SecretStore(redactor=redactor)        # redactor: the store's Redactor
    secrets.register_with(redactor)
    audit = AuditLog(redactor=redactor)             # CHORUS_HOME/audit/audit.jsonl
    gate = policy_callback(policy, audit, cwd=work, session_id=sid, secrets=secrets.values)
    options = BodyOptions(cwd=work, permission_callback=gate,
                          env={**base_env, **secrets.env_for(body_name, policy)})
    ...
    event = gate.observe(event)                     # audit tool calls, mark untrusted results
    gate.mode = "plan"                              # set_permission_mode, same on every body

One-shot bodies (no callback) take :func:`native_flags` instead; long-lived ones
also start with :func:`native_rules` (their CLI's own deny rules), because their
CLIs approve some calls without asking.
"""

from chorus.policy._audit import (
    AuditEntry,
    AuditLog,
    MigrateResult,
    ReanchorResult,
    VerifyResult,
    audit_dir,
)
from chorus.policy._engine import (
    AnswerHook,
    FlagHook,
    PolicyEngine,
    PolicyGate,
    SecondOpinion,
    Verdict,
    Vote,
    policy_callback,
    shell_command_text,
    tool_paths,
)
from chorus.policy._errors import (
    AuditError,
    FlagError,
    InvalidSecretError,
    KeyFileModeError,
    PolicyError,
    SecretNotFoundError,
    SecretStoreError,
)
from chorus.policy._flags import FlagAnswer, FlagBoard, PendingFlag, flags_dir
from chorus.policy._gemini_policy import policy_dir as native_dir
from chorus.policy._injection import (
    INJECTION_PATTERNS,
    ExfilFinding,
    InjectionMatch,
    InjectionReport,
    check_secret_values,
    check_shell_exfiltration,
    mark_untrusted,
    scan_text,
)
from chorus.policy._model import (
    DEFAULT_POLICY_TOML,
    PERMISSION_MODES,
    AskPolicy,
    FilesystemPolicy,
    McpPolicy,
    NativePolicy,
    NetworkPolicy,
    PermissionMode,
    Policy,
    RiskPolicy,
    SecretsPolicy,
    ShellPolicy,
    load_policy,
    parse_policy,
    policy_path,
)
from chorus.policy._native_flags import (
    DangerousFlag,
    NativeFlags,
    dangerous_flags,
    load_native_table,
    native_flags,
)
from chorus.policy._native_rules import NativeRules, native_rules
from chorus.policy._paths import (
    SENSITIVE_PATHS,
    PathContext,
    PathVerdict,
    brain_cwd_problem,
    check_path,
    resolve_path,
)
from chorus.policy._redact import RedactorLike, default_redactor, register_env
from chorus.policy._risk import (
    LEVELS,
    RiskAssessment,
    RiskLevel,
    assess_shell,
    assess_tool,
    risk_outcome,
)
from chorus.policy._secrets import (
    FileKey,
    KeyringKey,
    KeySource,
    Leak,
    SecretInfo,
    SecretStore,
    default_key_source,
    scan_for_leaks,
)
from chorus.policy._shell import ParsedCommand, Segment, ShellSyntaxError, parse_command
from chorus.policy._wording import POLICY_MARK, denial_notice, denial_text, is_told

__all__ = [
    "DEFAULT_POLICY_TOML",
    "INJECTION_PATTERNS",
    "LEVELS",
    "PERMISSION_MODES",
    "POLICY_MARK",
    "SENSITIVE_PATHS",
    "AnswerHook",
    "AskPolicy",
    "AuditEntry",
    "AuditError",
    "AuditLog",
    "DangerousFlag",
    "ExfilFinding",
    "FileKey",
    "FilesystemPolicy",
    "FlagAnswer",
    "FlagBoard",
    "FlagError",
    "FlagHook",
    "InjectionMatch",
    "InjectionReport",
    "InvalidSecretError",
    "KeyFileModeError",
    "KeySource",
    "KeyringKey",
    "Leak",
    "McpPolicy",
    "MigrateResult",
    "NativeFlags",
    "NativePolicy",
    "NativeRules",
    "NetworkPolicy",
    "ParsedCommand",
    "PathContext",
    "PathVerdict",
    "PendingFlag",
    "PermissionMode",
    "Policy",
    "PolicyEngine",
    "PolicyError",
    "PolicyGate",
    "ReanchorResult",
    "RedactorLike",
    "RiskAssessment",
    "RiskLevel",
    "RiskPolicy",
    "SecondOpinion",
    "SecretInfo",
    "SecretNotFoundError",
    "SecretStore",
    "SecretStoreError",
    "SecretsPolicy",
    "Segment",
    "ShellPolicy",
    "ShellSyntaxError",
    "Verdict",
    "VerifyResult",
    "Vote",
    "assess_shell",
    "assess_tool",
    "audit_dir",
    "brain_cwd_problem",
    "check_path",
    "check_secret_values",
    "check_shell_exfiltration",
    "dangerous_flags",
    "default_key_source",
    "default_redactor",
    "denial_notice",
    "denial_text",
    "flags_dir",
    "is_told",
    "load_native_table",
    "load_policy",
    "mark_untrusted",
    "native_dir",
    "native_flags",
    "native_rules",
    "parse_command",
    "parse_policy",
    "policy_callback",
    "policy_path",
    "register_env",
    "resolve_path",
    "risk_outcome",
    "scan_for_leaks",
    "scan_text",
    "shell_command_text",
    "tool_paths",
]
