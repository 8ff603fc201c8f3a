"""Errors raised by the policy layer, placed in Chorus's tree by who is to blame::

    ChorusError
    ├── PolicyError                 the policy layer itself could not do its job
    │   ├── AuditError              the audit log cannot be read or appended
    │   └── SecretStoreError        the secret store or its master key is unusable
    │       └── KeyFileModeError    the key file is readable by group or others
    └── UserError (exit 2)
        ├── ConfigError             policy.toml invalid (raised as chorus.ConfigError)
        ├── SecretNotFoundError     ``chorus secret rm NAME`` for an unknown name
        ├── InvalidSecretError      a bad secret name or a too-short value
        └── FlagError               an unknown flag id, or one already answered

A policy *denial* is not an error: it is a :class:`Verdict` with a reason.
"""

from __future__ import annotations

from chorus._errors import ChorusError, UserError


class PolicyError(ChorusError):
    """The policy layer could not do its job (I/O, corrupt state)."""


class AuditError(PolicyError):
    """The audit log cannot be read or appended."""


class SecretStoreError(PolicyError):
    """The secret store or its master key is unusable."""


class KeyFileModeError(SecretStoreError):
    """The master key file is readable or writable by someone other than its owner."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(f"{path}: key file has mode {mode:o}; it must be 600 (chmod 600 {path})")
        self.path = path
        self.mode = mode


class SecretNotFoundError(UserError):
    """No secret of that name is stored."""


class InvalidSecretError(UserError):
    """The secret's name or value is not acceptable."""


class FlagError(UserError):
    """The flag does not exist or has already been answered."""
