"""Native rules for long-lived bodies: the CLI's own refusals, from ``policy.toml``.

A long-lived body asks Chorus (its permission callback) about what its CLI asks
about, but Claude Code and Gemini CLI approve some calls by themselves (reading a
file in the folder, a read-only shell command), so ``Read .env`` never reaches
Chorus. Such a body starts with the rules its one-shot sibling gets (the
``[long_lived]`` table of ``native_flags.toml``), minus the mode flags (the
callback and the gate's mode stay in charge):

- ``claude``: ``--settings`` *ask* rules: every shell command, and reads and edits
  of denied paths (Claude Code applies them before anything it would approve, also
  in plan mode, where its own check would refuse a command with "Auto mode is
  unavailable"). Claude then asks Chorus, which refuses with the policy's rule and
  reason in the tool result, and audits (a deny rule would refuse in Claude's words);
- ``gemini``: ``--admin-policy FILE``, Gemini's policy engine TOML (writes in plan
  mode refused; denied commands, plan-mode commands and any call naming a denied
  path asked about, so Chorus refuses them with its reason and audits them);
- ``codex``: the allowed roots as the workspace sandbox's writable roots (``-c``
  at start, and in each ``turn/start``'s ``sandboxPolicy``, see ``roots``).
"""

from __future__ import annotations

from dataclasses import dataclass

from chorus.policy._model import Policy
from chorus.policy._native_flags import (
    NativeTable,
    allowed_roots,
    ask_rules,
    deny_rules,
    load_native_table,
    policy_file_args,
    writable_roots,
)
from chorus.policy._paths import PathContext


@dataclass(frozen=True, slots=True)
class NativeRules:
    """What a long-lived body adds to its CLI's command line (``args``), and the
    folders besides its own that it may write (``roots``, for per-turn settings)."""

    body: str
    args: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()


def native_rules(
    body: str,
    policy: Policy,
    *,
    ctx: PathContext,
    table: NativeTable | None = None,
    also: tuple[str, ...] = (),
) -> NativeRules:
    """The rules for ``body`` under ``policy`` in ``ctx`` (``ctx.cwd``: the body's
    folder); empty for a body the ``[long_lived]`` table does not list. ``also``:
    folders besides the policy's that the body may write (what a commit in a git
    worktree writes of the main repository, where the OS sandbox allows it)."""
    table = table or load_native_table()
    sibling = table.long_lived.get(body)
    if sibling is None:
        return NativeRules(body)
    entry = table.bodies[sibling]
    # The CLI asks Chorus (its reason, its audit) where it can; else it refuses denied
    # paths itself (commands: it asks about them anyway).
    args = ask_rules(entry, policy, ctx) or deny_rules(entry, policy, ctx, commands=False)
    args += writable_roots(entry, policy, ctx, also)
    args += policy_file_args(entry, policy, ctx, asks=True)
    roots = [*allowed_roots(policy, ctx), *also] if entry.writable_roots else []
    return NativeRules(body, tuple(args), tuple(roots))
