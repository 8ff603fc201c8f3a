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


#: Every git configuration key that names a program git runs: setting it is elevated
#: (it runs later, in every git of the repository, Chorus's own included).
GIT_PROGRAM_KEYS = [
    "core.hooksPath",
    "core.fsmonitor",
    "core.pager",
    "core.editor",
    "core.sshCommand",
    "core.askPass",
    "core.gitProxy",
    "core.alternateRefsCommand",
    "sequence.editor",
    "pager.log",
    "filter.lfs.clean",
    "filter.x.smudge",
    "filter.x.process",
    "diff.x.textconv",
    "diff.x.command",
    "diff.external",
    "merge.x.driver",
    "credential.helper",
    "credential.https://example.com.helper",
    "alias.st",
    "gpg.program",
    "gpg.ssh.program",
    "gpg.ssh.defaultKeyCommand",
    "remote.origin.uploadpack",
    "remote.origin.receivepack",
    "uploadpack.packObjectsHook",
    "protocol.ext.allow",
    "include.path",
    "includeIf.gitdir:~/work/.path",
    "difftool.x.cmd",
    "mergetool.x.cmd",
    "submodule.lib.update",
    "trailer.x.command",
]


@pytest.mark.parametrize("key", GIT_PROGRAM_KEYS)
def test_git_config_setting_a_program_is_elevated(key: str) -> None:
    assert level(f"git config {key} ./evil.sh") == "elevated"
    assert level(f"git config --local --add {key} ./evil.sh") == "elevated"
    assert level(f"git -C sub config --file .git/config {key} ./evil.sh") == "elevated"
    assert level(f"git config set {key} ./evil.sh") == "elevated"
    assert level(f"git -c {key}=./evil.sh status") == "elevated"
    assert level(f"git --config-env={key}=EVIL status") == "elevated"
    assert level(f"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={key} GIT_CONFIG_VALUE_0=x git log") == (
        "elevated"
    )


@pytest.mark.parametrize(
    "line",
    [
        "git config user.name 'A Person'",
        "git config --global user.email a@example.com",
        "git config core.autocrlf input",
        "git config filter.lfs.required true",
        "git config diff.x.xfuncname '^def'",
        "git config --get core.pager",
        "git config core.hooksPath",  # one word: a read
        "git config --unset core.hooksPath",
        "git config -l",
        "git -c user.name=x commit -m hi",
        "git -c protocol.version=2 log",
        "git commit -m 'GIT_PAGER=x in a message'",
    ],
)
def test_git_config_of_data_or_reads_stay_trivial(line: str) -> None:
    assert level(line) == "trivial"


def test_git_config_key_case_and_reasons() -> None:
    risk = assess_shell(parse_command("git config CORE.HOOKSPATH .hooks"))
    assert risk.level == "elevated"
    assert risk.reasons == ("`git config CORE.HOOKSPATH`: a program git will run later",)
    assert level("git config --edit") == "elevated"  # by hand: anything at all
    # git 2.46's subcommands: `get` reads (normal only as `get` reads like `go get`).
    assert level("git config get core.fsmonitor") == "normal"


@pytest.mark.parametrize(
    "line",
    [
        "GIT_EXTERNAL_DIFF=./x git diff",
        "env GIT_PAGER=./x git log",
        "GIT_SSH_COMMAND=./x git status",
        "GIT_CONFIG_PARAMETERS=\"'core.pager=./x'\" git log",
        "GIT_CONFIG_GLOBAL=./cfg git log",
    ],
)
def test_git_environment_naming_a_program_is_elevated(line: str) -> None:
    assert level(line) == "elevated"


@pytest.mark.parametrize(
    "line",
    [
        "printf '[core]\\n\\thooksPath = h\\n' >> .git/config",
        "cp evil.cfg .git/config",
        "tee -a .git/config < evil.cfg",
        "cp hook ../main/.git/hooks/post-commit",
        "sed -i 's/x/y/' .git/config",
    ],
)
def test_writing_the_repositorys_git_config_or_hooks_is_elevated(line: str) -> None:
    assert level(line) == "elevated"


def test_write_tools_on_git_config_and_reading_it() -> None:
    assert assess_tool("write", write_paths=["repo/.git/config"]).level == "elevated"
    assert level("cat .git/config") == "trivial"
    assert level("cp .git/config backup.cfg") == "trivial"
