"""Risk levels from the five factors, and what each authority setting does with them."""

from __future__ import annotations

import pytest

from chorus.policy import RiskLevel, assess_shell, assess_tool, parse_command, risk_outcome


def level(line: str, **kw: object) -> RiskLevel:
    return assess_shell(parse_command(line), **kw).level  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ls -la", "trivial"),
        ("git status && git diff", "trivial"),
        ("pytest -q", "trivial"),
        ("echo hi > out.txt", "normal"),
        ("rm notes.txt", "normal"),
        ("curl -s https://example.com", "normal"),
        ("git push origin main", "elevated"),
        ("rm -rf build", "elevated"),
        ("chmod -R 755 src", "elevated"),
        ("curl -d @report.json https://example.com", "elevated"),
        ("nc example.com 4444", "elevated"),
        ("chmod u+s ./tool", "elevated"),
        ("rm -rf /", "critical"),
        ("rm -rf ~", "critical"),
        ("sudo ls", "critical"),
        ("mkfs.ext4 /dev/sdb1", "critical"),
        ("dd if=img of=/dev/sda", "critical"),
        ("echo x > /etc/hosts", "critical"),
        ("npm publish", "critical"),
        ("terraform destroy -auto-approve", "critical"),
        ("psql -c 'DROP TABLE users'", "critical"),
    ],
)
def test_shell_levels(line: str, expected: RiskLevel) -> None:
    assert level(line) == expected


def test_worst_segment_decides() -> None:
    assert level("ls && git status && rm -rf /") == "critical"


def test_factors_and_reasons_are_reported() -> None:
    risk = assess_shell(parse_command("sudo rm -rf /var/lib/app"))
    assert risk.factors["privilege"] == 3
    assert risk.factors["irreversibility"] == 3
    assert any("sudo" in r for r in risk.reasons)
    assert risk.score >= 6


def test_production_raises_every_risky_action_one_level() -> None:
    assert level("git push origin main", environment="prod") == "critical"
    assert level("echo hi > out.txt", environment="prod") == "elevated"
    assert level("ls", environment="prod") == "trivial"  # nothing risky stays trivial
    assert level("kubectl --context production get pods") == "critical"


def test_untrusted_context_raises_network_risk() -> None:
    assert level("curl -s https://example.com") == "normal"
    assert level("curl -s https://example.com", untrusted_context=True) == "elevated"


@pytest.mark.parametrize(
    ("tool", "kw", "expected"),
    [
        ("read", {}, "trivial"),
        ("search", {}, "trivial"),
        ("write", {"write_paths": ["src/a.py"]}, "normal"),
        ("delete", {}, "elevated"),
        ("write", {"write_paths": [".github/workflows/ci.yml"]}, "elevated"),
        ("write", {"write_paths": ["x"], "outside_cwd": True}, "elevated"),
        ("web_fetch", {}, "normal"),
        ("mcp", {}, "normal"),
        ("mystery_tool", {}, "elevated"),
    ],
)
def test_tool_levels(tool: str, kw: dict[str, object], expected: RiskLevel) -> None:
    assert assess_tool(tool, **kw).level == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("authority", "outcomes"),
    [
        ("advisory", ["allow", "allow", "allow", "allow"]),
        ("escalate-only", ["allow", "allow", "ask", "ask"]),
        ("governing", ["allow", "allow", "ask", "deny"]),
    ],
)
def test_authority_settings(authority: str, outcomes: list[str]) -> None:
    levels: list[RiskLevel] = ["trivial", "normal", "elevated", "critical"]
    assert [risk_outcome(lv, authority) for lv in levels] == outcomes  # type: ignore[arg-type]
