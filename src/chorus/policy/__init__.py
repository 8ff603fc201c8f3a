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

from __future__ import annotations

from chorus._lazy import lazy_names

#: ``typing`` is not imported at run time (the names load on first use).
TYPE_CHECKING = False

if TYPE_CHECKING:
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

#: Each public name's private module (and its name there): loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "AuditEntry": ("chorus.policy._audit", "AuditEntry"),
    "AuditLog": ("chorus.policy._audit", "AuditLog"),
    "MigrateResult": ("chorus.policy._audit", "MigrateResult"),
    "ReanchorResult": ("chorus.policy._audit", "ReanchorResult"),
    "VerifyResult": ("chorus.policy._audit", "VerifyResult"),
    "audit_dir": ("chorus.policy._audit", "audit_dir"),
    "AnswerHook": ("chorus.policy._engine", "AnswerHook"),
    "FlagHook": ("chorus.policy._engine", "FlagHook"),
    "PolicyEngine": ("chorus.policy._engine", "PolicyEngine"),
    "PolicyGate": ("chorus.policy._engine", "PolicyGate"),
    "SecondOpinion": ("chorus.policy._engine", "SecondOpinion"),
    "Verdict": ("chorus.policy._engine", "Verdict"),
    "Vote": ("chorus.policy._engine", "Vote"),
    "policy_callback": ("chorus.policy._engine", "policy_callback"),
    "shell_command_text": ("chorus.policy._engine", "shell_command_text"),
    "tool_paths": ("chorus.policy._engine", "tool_paths"),
    "AuditError": ("chorus.policy._errors", "AuditError"),
    "FlagError": ("chorus.policy._errors", "FlagError"),
    "InvalidSecretError": ("chorus.policy._errors", "InvalidSecretError"),
    "KeyFileModeError": ("chorus.policy._errors", "KeyFileModeError"),
    "PolicyError": ("chorus.policy._errors", "PolicyError"),
    "SecretNotFoundError": ("chorus.policy._errors", "SecretNotFoundError"),
    "SecretStoreError": ("chorus.policy._errors", "SecretStoreError"),
    "FlagAnswer": ("chorus.policy._flags", "FlagAnswer"),
    "FlagBoard": ("chorus.policy._flags", "FlagBoard"),
    "PendingFlag": ("chorus.policy._flags", "PendingFlag"),
    "flags_dir": ("chorus.policy._flags", "flags_dir"),
    "native_dir": ("chorus.policy._gemini_policy", "policy_dir"),
    "INJECTION_PATTERNS": ("chorus.policy._injection", "INJECTION_PATTERNS"),
    "ExfilFinding": ("chorus.policy._injection", "ExfilFinding"),
    "InjectionMatch": ("chorus.policy._injection", "InjectionMatch"),
    "InjectionReport": ("chorus.policy._injection", "InjectionReport"),
    "check_secret_values": ("chorus.policy._injection", "check_secret_values"),
    "check_shell_exfiltration": ("chorus.policy._injection", "check_shell_exfiltration"),
    "mark_untrusted": ("chorus.policy._injection", "mark_untrusted"),
    "scan_text": ("chorus.policy._injection", "scan_text"),
    "DEFAULT_POLICY_TOML": ("chorus.policy._model", "DEFAULT_POLICY_TOML"),
    "PERMISSION_MODES": ("chorus.policy._model", "PERMISSION_MODES"),
    "AskPolicy": ("chorus.policy._model", "AskPolicy"),
    "FilesystemPolicy": ("chorus.policy._model", "FilesystemPolicy"),
    "McpPolicy": ("chorus.policy._model", "McpPolicy"),
    "NativePolicy": ("chorus.policy._model", "NativePolicy"),
    "NetworkPolicy": ("chorus.policy._model", "NetworkPolicy"),
    "PermissionMode": ("chorus.policy._model", "PermissionMode"),
    "Policy": ("chorus.policy._model", "Policy"),
    "RiskPolicy": ("chorus.policy._model", "RiskPolicy"),
    "SecretsPolicy": ("chorus.policy._model", "SecretsPolicy"),
    "ShellPolicy": ("chorus.policy._model", "ShellPolicy"),
    "load_policy": ("chorus.policy._model", "load_policy"),
    "parse_policy": ("chorus.policy._model", "parse_policy"),
    "policy_path": ("chorus.policy._model", "policy_path"),
    "DangerousFlag": ("chorus.policy._native_flags", "DangerousFlag"),
    "NativeFlags": ("chorus.policy._native_flags", "NativeFlags"),
    "dangerous_flags": ("chorus.policy._native_flags", "dangerous_flags"),
    "load_native_table": ("chorus.policy._native_flags", "load_native_table"),
    "native_flags": ("chorus.policy._native_flags", "native_flags"),
    "NativeRules": ("chorus.policy._native_rules", "NativeRules"),
    "native_rules": ("chorus.policy._native_rules", "native_rules"),
    "SENSITIVE_PATHS": ("chorus.policy._paths", "SENSITIVE_PATHS"),
    "PathContext": ("chorus.policy._paths", "PathContext"),
    "PathVerdict": ("chorus.policy._paths", "PathVerdict"),
    "brain_cwd_problem": ("chorus.policy._paths", "brain_cwd_problem"),
    "check_path": ("chorus.policy._paths", "check_path"),
    "resolve_path": ("chorus.policy._paths", "resolve_path"),
    "RedactorLike": ("chorus.policy._redact", "RedactorLike"),
    "default_redactor": ("chorus.policy._redact", "default_redactor"),
    "register_env": ("chorus.policy._redact", "register_env"),
    "LEVELS": ("chorus.policy._risk", "LEVELS"),
    "RiskAssessment": ("chorus.policy._risk", "RiskAssessment"),
    "RiskLevel": ("chorus.policy._risk", "RiskLevel"),
    "assess_shell": ("chorus.policy._risk", "assess_shell"),
    "assess_tool": ("chorus.policy._risk", "assess_tool"),
    "risk_outcome": ("chorus.policy._risk", "risk_outcome"),
    "FileKey": ("chorus.policy._secrets", "FileKey"),
    "KeyringKey": ("chorus.policy._secrets", "KeyringKey"),
    "KeySource": ("chorus.policy._secrets", "KeySource"),
    "Leak": ("chorus.policy._secrets", "Leak"),
    "SecretInfo": ("chorus.policy._secrets", "SecretInfo"),
    "SecretStore": ("chorus.policy._secrets", "SecretStore"),
    "default_key_source": ("chorus.policy._secrets", "default_key_source"),
    "scan_for_leaks": ("chorus.policy._secrets", "scan_for_leaks"),
    "ParsedCommand": ("chorus.policy._shell", "ParsedCommand"),
    "Segment": ("chorus.policy._shell", "Segment"),
    "ShellSyntaxError": ("chorus.policy._shell", "ShellSyntaxError"),
    "parse_command": ("chorus.policy._shell", "parse_command"),
    "POLICY_MARK": ("chorus.policy._wording", "POLICY_MARK"),
    "denial_notice": ("chorus.policy._wording", "denial_notice"),
    "denial_text": ("chorus.policy._wording", "denial_text"),
    "is_told": ("chorus.policy._wording", "is_told"),
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, __all__)
