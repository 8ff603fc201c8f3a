"""The public surface of chorus.policy is explicit and pinned."""

from __future__ import annotations

import chorus.policy as policy


def test_all_names_exist_and_are_public() -> None:
    for name in policy.__all__:
        assert hasattr(policy, name), name
        assert not name.startswith("_")
    assert policy.__all__ == sorted(
        policy.__all__, key=lambda n: (not n.isupper(), n[0].islower(), n)
    )


def test_the_integration_surface_is_exported() -> None:
    assert {
        "policy_callback",
        "PolicyGate",
        "PolicyEngine",
        "Verdict",
        "AuditLog",
        "FlagBoard",
        "SecretStore",
        "scan_for_leaks",
        "native_flags",
        "load_policy",
        "scan_text",
        "mark_untrusted",
        "parse_command",
    } <= set(policy.__all__)
