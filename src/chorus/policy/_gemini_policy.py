"""Gemini CLI's own policy file (its policy engine's TOML), written from ``policy.toml``.

Gemini approves some tool calls by itself (``read_file`` inside the folder, read-only
shell commands), so Chorus's callback never hears of them. Started with this file
(``--admin-policy``: the highest tier, above the user's own rules) the CLI refuses,
each time with the policy's wording and rule (``chorus.policy.denial_text``):

- the policy's denied shell commands (``commandPrefix``; Gemini checks each part of
  a compound command on its own);
- any tool call whose arguments name a denied path (``argsPattern``, a regular
  expression over the call's JSON arguments: ``read_file .env``, ``cat .env``, a
  ``write_file`` into ``~/.ssh``); a body with a callback asks Chorus about those
  instead (its reason, its audit), outside yolo mode;
- writes in plan mode (``modes = ["plan"]``), on top of Gemini's own plan rules.

It also offers the shell: headless Gemini drops every tool whose decision would be
"ask" (it cannot ask), which left the one-shot body with no shell at all. Without
a callback the shell is allowed (the sandbox holds it) but refused in plan mode;
with one, plan-mode commands are asked about (Chorus allows read-only ones).

:func:`gemini_policy_toml` is pure; :func:`write_policy_file` puts the text in a
private folder under the temporary directory (which the body's sandbox keeps
visible), rewritten at every start so an edit by a previous body does not last.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from chorus._errors import ConfigError
from chorus.policy._model import Policy
from chorus.policy._paths import HOME_WORK_FOLDERS, PathContext, is_under
from chorus.policy._wording import denial_text

#: Priority inside the tier (0..999): above anything a user or extension adds.
PRIORITY = 990
#: The shell offered to the model: below every refusal of this file.
OFFER_PRIORITY = 100
_PLAN_WRITES = "plan mode is read-only: write calls are not allowed"
_PLAN_SHELL = "plan mode is read-only: this body cannot hold a shell command to reading"
#: An ``argsPattern`` every call matches.
ANY_ARGS = "[\\s\\S]"
#: Gemini's tools that write files (plan mode refuses them).
WRITE_TOOLS = ("write_file", "replace")
#: Gemini's approval modes in which a denied command is routed to Chorus (``asks``).
ASK_MODES = ("default", "autoEdit", "yolo")
#: Gemini's shell tool.
SHELL_TOOL = "run_shell_command"
#: A character that may be part of a file name (so a match must not touch one).
_NAME = r"[A-Za-z0-9_.\-]"
#: What a glob's ``*`` stands for inside one path part of a JSON string.
_PART = r'[^/"\s\\]'
_SPECIAL = frozenset("\\^$.|?*+()[]{}/")
_GLOBS = frozenset("*?[")


def denied_path_forms(pattern: str, ctx: PathContext) -> list[str]:
    """The forms a denied path pattern takes in a CLI's own rules.

    Placeholders are expanded; ``{chorus_home}`` becomes its entries except the work
    folders when the body works inside it (a job worktree), else the home itself.
    """
    if pattern == "{chorus_home}" and is_under(ctx.cwd.resolve(), ctx.chorus_home.resolve()):
        return [str(p) for p in _home_entries(ctx.chorus_home)]
    return [ctx.expand(pattern) if "{" in pattern else pattern]


def _home_entries(home: Path) -> Iterator[Path]:
    try:
        entries = sorted(home.iterdir())
    except OSError:
        return
    yield from (e for e in entries if e.name not in HOME_WORK_FOLDERS)


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def glob_regex(glob: str) -> str:
    """A JavaScript regular expression that finds ``glob`` (a path pattern) inside a
    tool call's JSON arguments: as a whole path part, anywhere in any string."""
    out: list[str] = []
    i = 3 if glob.startswith("**/") else 0  # the start check already allows any folder
    while i < len(glob):
        if glob.startswith("**/", i):
            # No quantified group: Gemini refuses such a pattern as a ReDoS risk.
            out.append(r'(?:[^"\s\\]*/|)')
            i += 3
        elif glob.startswith("**", i):
            out.append(r'[^"\s\\]*')
            i += 2
        else:
            out.append({"*": _PART + "*", "?": _PART}.get(glob[i], _escape(glob[i])))
            i += 1
    body = "".join(out)
    start = "" if glob.startswith("/") else f"(?<!{_NAME})"
    return f"{start}{body}(?!{_NAME})"


def _path_regex(path: str, ctx: PathContext) -> str:
    """``path`` as written, plus its ``~/`` spelling when it lies under the home."""
    forms = [glob_regex(path)]
    home = str(ctx.home).rstrip("/")
    if path.startswith(home + "/"):
        forms.append(r"~/" + glob_regex(path[len(home) + 1 :]).removeprefix(f"(?<!{_NAME})"))
    return forms[0] if len(forms) == 1 else "(?:" + "|".join(forms) + ")"


def _rule(fields: dict[str, object]) -> str:
    lines = ["[[rule]]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines)


def _command_prefixes(policy: Policy) -> list[str]:
    if policy.shell.mode == "unrestricted":
        return []
    prefixes = (c.rstrip("*").strip() for c in policy.shell.denied_commands)
    return list(dict.fromkeys(p for p in prefixes if p and not _GLOBS.intersection(p)))


def gemini_policy_toml(policy: Policy, ctx: PathContext, *, asks: bool = False) -> str:
    """The policy-engine TOML for ``policy`` in ``ctx`` (deterministic).

    ``asks``: the body has a permission callback, so a denied command is routed to
    Chorus (``ask_user``: refused there, with the policy's reason, and audited)
    rather than refused by Gemini; Gemini can no longer approve it by itself either
    way; so is a call naming a denied path (refused by Gemini in yolo mode, where an
    ask would be approved). Every refusal Gemini makes itself
    carries the policy's wording (``denyMessage``, which Gemini puts in the tool
    result after "Tool execution denied by policy.").
    """
    rules = [*_command_rules(policy, asks), *_path_rules(policy, ctx, asks), _plan_writes()]
    rules += _shell_rules(asks)
    head = "# Written by Chorus from policy.toml at every start; edits do not last.\n"
    return head + "\n\n".join(_rule(r) for r in rules) + "\n"


def _command_rules(policy: Policy, asks: bool) -> list[dict[str, object]]:
    """One rule per denied command (so that its refusal can name it)."""
    out: list[dict[str, object]] = []
    for prefix in _command_prefixes(policy):
        rule: dict[str, object] = {"toolName": SHELL_TOOL, "commandPrefix": [prefix]}
        if asks:
            # Not in plan mode, where Chorus refuses every command but read-only
            # ones: the catch-all ask below takes it there.
            rule.update(decision="ask_user", priority=PRIORITY, modes=list(ASK_MODES))
        else:
            why = f"`{prefix}` is a denied command (policy.toml [shell] denied_commands)"
            told = denial_text("shell.denied_command", why, "shell")
            rule.update(decision="deny", priority=PRIORITY, denyMessage=told)
        out.append(rule)
    return out


def _path_rules(policy: Policy, ctx: PathContext, asks: bool) -> list[dict[str, object]]:
    """A refusal for every call naming a denied path. With a callback the call is asked
    about instead (Chorus refuses it with its reason and audits; Gemini over ACP would
    drop the message), except in yolo mode, where Gemini would approve an ask."""
    out: list[dict[str, object]] = []
    for pattern in policy.filesystem.denied_paths:
        for path in (ctx.expand(p) for p in denied_path_forms(pattern, ctx)):
            why = f"the call names the denied path '{pattern}'"
            rule = {"toolName": "*", "argsPattern": _path_regex(path, ctx)}
            if asks:
                out.append({**rule, "decision": "ask_user", "priority": PRIORITY,
                            "modes": [m for m in (*ASK_MODES, "plan") if m != "yolo"]})  # fmt: skip
            deny = {"decision": "deny", "priority": PRIORITY - (1 if asks else 0)}
            out.append({**rule, **deny, "denyMessage": denial_text("filesystem.denied_path", why)})
    return out


def _plan_writes() -> dict[str, object]:
    """Writes in plan mode, refused with the reason. A rule with an ``argsPattern``
    keeps the tool offered (a plain deny would drop it: "tool not found")."""
    return {
        "toolName": list(WRITE_TOOLS),
        "modes": ["plan"],
        "argsPattern": ANY_ARGS,
        "decision": "deny",
        "priority": PRIORITY,
        "denyMessage": denial_text("mode.plan", _PLAN_WRITES, "write"),
    }


def _shell_rules(asks: bool) -> list[dict[str, object]]:
    """The shell offered in every mode (else a one-shot Gemini has none at all, and a
    plan-mode one answers "tool not found"). With a callback, plan-mode commands go
    to Chorus (read-only ones are allowed there); without one, plan mode refuses
    them with the reason (Gemini cannot hold a command to reading)."""
    if asks:
        return [{"toolName": SHELL_TOOL, "modes": ["plan"], "decision": "ask_user",
                 "priority": OFFER_PRIORITY}]  # fmt: skip
    plan = {
        "toolName": SHELL_TOOL,
        "modes": ["plan"],
        "argsPattern": ANY_ARGS,
        "decision": "deny",
        "priority": PRIORITY,
        "denyMessage": denial_text("mode.plan", _PLAN_SHELL, "shell"),
    }
    # Redirections too: Gemini would otherwise make ``echo x > f`` an ask (a refusal here).
    offer = {"toolName": SHELL_TOOL, "decision": "allow", "priority": OFFER_PRIORITY,
             "allowRedirection": True}  # fmt: skip
    return [plan, offer]


#: Gemini's system policy folder (Linux); with a ``.toml`` in it, Gemini ignores
#: ``--admin-policy`` (with a warning), so the file must go in the user tier instead.
SYSTEM_POLICIES = Path("/etc/gemini-cli/policies")


def admin_tier_free(system: Path = SYSTEM_POLICIES) -> bool:
    """Whether Gemini will take an ``--admin-policy`` file (no system policies)."""
    try:
        return not any(p.suffix == ".toml" for p in system.iterdir())
    except OSError:
        return True


def policy_dir() -> Path:
    """A folder only this user can use, under the temporary directory, made if need
    be; :class:`ConfigError` when someone else owns it. Every body's sandbox keeps it
    visible but read-only: a body cannot rewrite its own CLI's rules."""
    folder = Path(tempfile.gettempdir()) / f"chorus-native-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"{folder} is not a folder of this user: remove it and try again")
    if info.st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def write_policy_file(text: str, name: str = "gemini", folder: Path | None = None) -> Path:
    """Write ``text`` (atomically, 0600) to a file named by its digest; its path."""
    folder = folder or policy_dir()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = folder / f"{name}-{digest}.toml"
    scratch = folder / f".{path.name}.{os.getpid()}"
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    scratch.replace(path)
    return path
