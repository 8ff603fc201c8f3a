"""Heuristic risk of one tool call: five factors, one level.

Each factor is scored 0..3 from what the call would do:

* ``irreversibility``: can it be undone (``rm -rf``, ``git push --force``, ``mkfs``)?
* ``blast_radius``: how much can it touch (recursive, ``/``, a shared remote, a deploy)?
* ``privilege``: does it raise or change privileges (``sudo``, ``chmod u+s``, ``/etc``)?
* ``network``: does it send data out (uploads, raw sockets, ``scp``)?
* ``environment``: is it aimed at production (``policy.risk.environment = "prod"``,
  ``--context prod``)?

The level is the highest of the first four (0 trivial, 1 normal, 2 elevated,
3 critical), raised one step when the environment factor is set and the call
does anything at all. What the level *does* depends on the policy's
``authority`` (:func:`risk_outcome`). The heuristics only ever add risk; they
never make a call that a rule denied acceptable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from chorus.policy._escapes import inline_code
from chorus.policy._model import Authority, Environment
from chorus.policy._shell import (
    FETCHERS,
    PRIVILEGE_WRAPPERS,
    ParsedCommand,
    Segment,
    is_script_runner,
)

RiskLevel = Literal["trivial", "normal", "elevated", "critical"]
LEVELS: tuple[RiskLevel, ...] = ("trivial", "normal", "elevated", "critical")
FACTORS = ("irreversibility", "blast_radius", "privilege", "network", "environment")

#: Tool categories (normalized tool names grouped by what they can do).
READ_TOOLS = frozenset({"read", "search", "glob", "list", "think", "todo", "ask_user", "task"})
WRITE_TOOLS = frozenset({"write", "edit", "delete", "move"})
SHELL_TOOLS = frozenset({"shell", "shell_input", "shell_output", "shell_kill"})
NETWORK_TOOLS = frozenset({"web_fetch", "web_search"})

_ROOTISH = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "*", ".", "..", "/home"})
_SYSTEM_DIRS = ("/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/var", "/sys", "/dev", "/System")
_PROD_WORDS = re.compile(r"(?<![A-Za-z])(prod|production|live)(?![A-Za-z])", re.IGNORECASE)
_PERSISTENCE = re.compile(
    r"(^|/)(\.bashrc|\.zshrc|\.profile|\.bash_profile|\.gitconfig|\.git/hooks/.*|"
    r"\.github/workflows/.*|\.gitlab-ci\.yml|crontab|\.ssh/authorized_keys)$"
)
_SQL_DESTROY = re.compile(r"\b(drop\s+(table|database|schema)|truncate\s+table)\b", re.IGNORECASE)

# fmt: off
_PRIVILEGED_ADMIN = frozenset({
    "mount", "umount", "useradd", "userdel", "usermod", "passwd", "visudo", "iptables", "nft",
    "ufw", "setcap", "insmod", "modprobe",
})
# fmt: on
# Commands by what they do: (names, factor, score). A command may hit several.
_COMMAND_FACTORS: tuple[tuple[frozenset[str], str, int], ...] = (
    (frozenset({"mkfs", "wipefs", "shred", "fdisk", "parted", "sfdisk"}), "irreversibility", 3),
    (frozenset({"truncate", "srm"}), "irreversibility", 2),
    (frozenset({"rm", "rmdir", "unlink", "mv"}), "irreversibility", 1),
    (_PRIVILEGED_ADMIN, "privilege", 3),
    (
        frozenset(
            {
                "chown",
                "chgrp",
                "systemctl",
                "service",
                "launchctl",
                "crontab",
                "chroot",
                "at",
                "batch",
            }
        ),
        "privilege",
        2,
    ),
    (frozenset({"nc", "ncat", "netcat", "socat", "telnet"}), "network", 2),
    (frozenset({"scp", "sftp", "ftp", "rsync", "rclone"}), "network", 2),
    (
        frozenset({"kubectl", "helm", "terraform", "pulumi", "ansible-playbook", "flyctl"}),
        "blast_radius",
        2,
    ),
)

# Subcommands that change shared state: (program, subcommand words, factor, score).
_SUBCOMMANDS: tuple[tuple[str, tuple[str, ...], str, int], ...] = (
    ("git", ("push",), "blast_radius", 2),
    ("git", ("reset", "--hard"), "irreversibility", 2),
    ("git", ("clean",), "irreversibility", 2),
    ("git", ("branch", "-D"), "irreversibility", 2),
    ("git", ("checkout", "--"), "irreversibility", 1),
    ("git", ("filter-branch",), "irreversibility", 3),
    ("npm", ("publish",), "blast_radius", 3),
    ("cargo", ("publish",), "blast_radius", 3),
    ("twine", ("upload",), "blast_radius", 3),
    ("gh", ("release",), "blast_radius", 2),
    ("docker", ("push",), "blast_radius", 3),
    ("docker", ("system", "prune"), "irreversibility", 2),
    ("kubectl", ("delete",), "irreversibility", 3),
    ("terraform", ("destroy",), "irreversibility", 3),
    ("terraform", ("apply",), "blast_radius", 3),
    ("helm", ("uninstall",), "irreversibility", 3),
)


@dataclass(frozen=True, slots=True)
class RiskAssessment:
    """Factor scores (0..3), the resulting level, and why."""

    level: RiskLevel
    factors: dict[str, int]
    reasons: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        """Sum of the factors (for sorting and display; the level is what decides)."""
        return sum(self.factors.values())

    def at_least(self, level: RiskLevel) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)


@dataclass(slots=True)
class _Scores:
    factors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACTORS, 0))
    reasons: list[str] = field(default_factory=list)

    def add(self, factor: str, score: int, reason: str) -> None:
        if score > self.factors[factor]:
            self.factors[factor] = score
        if score > 0 and reason not in self.reasons:
            self.reasons.append(reason)

    def result(self, environment: Environment) -> RiskAssessment:
        if environment != "dev":
            self.add("environment", 2 if environment == "prod" else 1, f"{environment} environment")
        peak = max(self.factors[f] for f in FACTORS[:4])
        bump = 1 if self.factors["environment"] >= 2 and peak >= 1 else 0
        level = LEVELS[min(3, peak + bump)]
        return RiskAssessment(level, dict(self.factors), tuple(self.reasons))


def assess_tool(
    tool: str,
    *,
    environment: Environment = "dev",
    write_paths: Iterable[str] = (),
    outside_cwd: bool = False,
    untrusted_context: bool = False,
) -> RiskAssessment:
    """Risk of a non-shell tool from its category and the paths it writes."""
    scores = _Scores()
    if tool in WRITE_TOOLS:
        scores.add("irreversibility", 2 if tool == "delete" else 1, f"{tool} changes files")
        for path in write_paths:
            if _PERSISTENCE.search(path):
                scores.add("privilege", 2, f"writes {path}, which runs code later")
        if outside_cwd:
            scores.add("blast_radius", 2, "writes outside the working directory")
    elif tool in NETWORK_TOOLS:
        scores.add("network", 2 if untrusted_context else 1, f"{tool} reaches the network")
    elif tool == "mcp":
        scores.add("blast_radius", 1, "an MCP tool can do anything its server allows")
    elif tool not in READ_TOOLS and tool not in SHELL_TOOLS:
        scores.add("blast_radius", 2, f"unknown tool kind {tool!r}")
    return scores.result(environment)


def assess_shell(
    parsed: ParsedCommand,
    *,
    environment: Environment = "dev",
    untrusted_context: bool = False,
    unknown_dir: bool = False,
) -> RiskAssessment:
    """Risk of a command line: every segment scored, the worst one counts.
    ``unknown_dir``: some command runs in a folder known only at run time."""
    scores = _Scores()
    if unknown_dir:
        scores.add("blast_radius", 2, "a command runs in a folder known only at run time")
    for seg in parsed.commands():
        if is_script_runner(seg):
            continue  # its script's segments are scored themselves
        _score_segment(seg, scores, untrusted_context)
        _score_indirection(seg, scores)
    if _PROD_WORDS.search(parsed.source):
        scores.add("environment", 2, "the command names a production target")
    return scores.result(environment)


def _score_segment(seg: Segment, scores: _Scores, untrusted: bool) -> None:
    name = seg.name
    args = seg.argv[1:]
    _privilege(seg, scores)
    family = name.split(".", 1)[0]  # mkfs.ext4 is mkfs
    for names, factor, score in _COMMAND_FACTORS:
        if name in names or family in names:
            scores.add(factor, score, f"`{name}` ({factor.replace('_', ' ')})")
    for program, words, factor, score in _SUBCOMMANDS:
        if name == program and _has_words(args, words):
            scores.add(factor, score, f"`{program} {' '.join(words)}`")
    _removal(seg, scores)
    _recursion(seg, scores)
    _network(seg, scores, untrusted)
    _redirects(seg, scores)
    if name in {"dd"} and any(a.startswith("of=/dev/") for a in args):
        scores.add("irreversibility", 3, "`dd` onto a device")
    if any(_SQL_DESTROY.search(a) for a in args):
        scores.add("irreversibility", 3, "destructive SQL")


_AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
_AWK_RUNS = re.compile(r"system\s*\(|\|\s*getline|getline\s*<|print[^;}]*\|")
_GIT_RUNS_CONFIG = re.compile(
    r"^(alias\.[^=]+=\s*!|core\.(sshcommand|pager|editor|fsmonitor|hookspath|gitproxy)=|"
    r"(diff|merge|filter)\.[^=]+\.[^=]+=|credential\.helper=|uploadpack\.|protocol\.)",
    re.IGNORECASE,
)


def _score_indirection(seg: Segment, scores: _Scores) -> None:
    """Code the policy cannot read: a program named at run time, inline interpreter
    code, awk's ``system()``, git configuration that runs commands."""
    if seg.dynamic:
        scores.add("blast_radius", 2, f"`{seg.text}`: the program name is computed at run time")
    if inline_code(seg) is not None:
        scores.add("blast_radius", 2, f"`{seg.name}` runs inline code")
    if seg.name in _AWK and any(_AWK_RUNS.search(a) for a in seg.argv[1:]):
        scores.add("blast_radius", 2, f"`{seg.name}` runs commands from its program")
    if seg.name == "git" and any(_GIT_RUNS_CONFIG.match(v) for v in _git_configs(seg.argv)):
        scores.add("blast_radius", 2, "`git -c` sets configuration that runs commands")


def _git_configs(argv: tuple[str, ...]) -> list[str]:
    return [argv[k + 1] for k, a in enumerate(argv[:-1]) if a in ("-c", "--config-env")]


def _has_words(args: tuple[str, ...], words: tuple[str, ...]) -> bool:
    remaining = iter(args)
    return all(any(a == w for a in remaining) for w in words)


def _privilege(seg: Segment, scores: _Scores) -> None:
    wrappers = {os.path.basename(w) for w in seg.wrappers} | {seg.name}
    raised = wrappers & PRIVILEGE_WRAPPERS
    if raised:
        scores.add("privilege", 3, f"runs as another user via {', '.join(sorted(raised))}")
    if seg.name == "chmod" and any(_dangerous_mode(a) for a in seg.argv[1:]):
        scores.add("privilege", 2, "`chmod` to setuid/setgid or world-writable")


def _dangerous_mode(mode: str) -> bool:
    """True for a chmod mode that sets setuid/setgid or makes a file world-writable."""
    if re.fullmatch(r"[0-7]{3,4}", mode):
        special = int(mode[0]) if len(mode) == 4 else 0
        return bool(special & 0b110) or int(mode[-1]) & 0b010 != 0
    symbolic = re.fullmatch(r"([ugoa]*)[+=]([rwxXst]*)", mode)
    if symbolic:
        who, perms = symbolic.groups()
        return "s" in perms or ("w" in perms and (who in ("", "a") or "o" in who))
    return False


def _removal(seg: Segment, scores: _Scores) -> None:
    if seg.name not in ("rm", "rmdir", "unlink", "find"):
        return
    flags = "".join(a[1:] for a in seg.argv[1:] if a.startswith("-") and not a.startswith("--"))
    forceful = "r" in flags.lower() or "f" in flags or "--recursive" in seg.argv
    targets = [a for a in seg.argv[1:] if not a.startswith("-")]
    if seg.name == "find" and "-delete" in seg.argv:
        scores.add("irreversibility", 2, "`find -delete`")
    if seg.name == "rm" and forceful:
        scores.add("irreversibility", 2, "`rm` recursive or forced")
    if any(t in _ROOTISH or t.startswith(_SYSTEM_DIRS) for t in targets) and forceful:
        scores.add("irreversibility", 3, "forced removal of a root, home or system folder")
        scores.add("blast_radius", 3, "removal aimed at a root, home or system folder")


def _recursion(seg: Segment, scores: _Scores) -> None:
    recursive = any(a in ("-R", "-r", "--recursive") for a in seg.argv[1:])
    if recursive and seg.name in ("chmod", "chown", "chgrp", "rm", "cp", "mv", "sed"):
        scores.add("blast_radius", 2, f"`{seg.name}` applied recursively")
    if "xargs" in {os.path.basename(w) for w in seg.wrappers} and seg.name in ("rm", "mv", "chmod"):
        scores.add("blast_radius", 2, f"`{seg.name}` applied to a generated list of files")


_UPLOAD_FLAGS = re.compile(
    r"^(-d|--data(-binary|-raw|-urlencode)?|-F|--form|-T|--upload-file|--post-(data|file)"
    r"|--body-data|--body-file|-X|--request)(=.*)?$"
)


def _network(seg: Segment, scores: _Scores, untrusted: bool) -> None:
    if seg.name in FETCHERS:
        uploading = any(_UPLOAD_FLAGS.match(a) for a in seg.argv[1:])
        score = 2 if uploading else 1
        scores.add("network", min(3, score + (1 if untrusted else 0)), f"`{seg.name}` network call")
    elif seg.name in ("ssh", "git", "pip", "pip3", "npm", "pnpm", "yarn", "cargo", "go", "gh"):
        if any(a in ("push", "clone", "fetch", "pull", "install", "add", "get") for a in seg.argv):
            scores.add("network", 1, f"`{seg.name}` reaches the network")
        if seg.name == "ssh":
            scores.add("network", 1, "`ssh` to another host")


def _redirects(seg: Segment, scores: _Scores) -> None:
    for redirect in seg.redirects:
        if not redirect.writes or redirect.target.startswith("/dev/null"):
            continue
        if redirect.target.startswith(_SYSTEM_DIRS):
            scores.add("privilege", 3, f"writes into {redirect.target}")
        elif redirect.op in (">", ">|", "&>"):
            scores.add("irreversibility", 1, f"overwrites {redirect.target}")


def risk_outcome(level: RiskLevel, authority: Authority) -> Literal["allow", "ask", "deny"]:
    """What a risk level decides under an authority setting.

    ``advisory``: never changes a decision (the level is only recorded).
    ``escalate-only``: elevated or critical risk asks a person; risk alone never denies.
    ``governing``: elevated asks, critical denies.
    """
    if authority == "advisory" or level in ("trivial", "normal"):
        return "allow"
    if authority == "escalate-only" or level == "elevated":
        return "ask"
    return "deny"
