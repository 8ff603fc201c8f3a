"""Git through subprocess, run so that it executes nothing the repository names.

Every git Chorus runs (worktree creation, the job's end-of-run commit, status,
diff, merge, removal, the reflect framework's diff) goes through :func:`run`. A
body may have written the repository's ``.git`` (config, hooks, attributes), and
these runs happen in Chorus's own process, unsandboxed: a hook, an fsmonitor, a
clean/smudge/process filter, a textconv or external diff, a merge driver, a
pager, an editor, a credential helper, an ssh command, an askpass or a gpg
program that git ran there could read CHORUS_HOME. So, for every run:

* **The repository's own settings that name a program are overridden.** Its
  config cannot be switched off (``.git/config`` is always read), so
  ``git config --list --name-only -z`` (reading config runs nothing) lists every
  key git would see in that folder (system, global, the repository's, its
  worktree's, and whatever they include), and each key that names a program gets
  an inert value (:data:`_INERT`: ``filter.<x>.clean`` empty with
  ``required=false``, ``diff.<x>.textconv=cat``, ``merge.<x>.driver=false``,
  which makes that file a conflict, never a silent pick, ...). The overrides are
  passed as ``GIT_CONFIG_COUNT``/``KEY``/``VALUE`` environment entries: the
  command-line scope, above every config file, read by the git child processes
  too, and with no parsing of ``key=value`` (a subsection may contain ``=``).
  The person's own global and system config stay in force for what is data
  (identity, ``core.excludesFile``, ``safe.directory``), but their programs are
  overridden as well: git-lfs and the like read the repository's config too.
* **Fixed settings** (:data:`_FIXED`): hooks from ``/dev/null``, no fsmonitor,
  no credential helper, no signing or signature checks, no submodule recursion
  or submodule status (a submodule has a config of its own, which the listing
  does not see), no transport (``protocol.allow=never``), no automatic gc.
* **Fixed flags and environment:** ``--no-pager``; ``diff`` and ``log`` get
  ``--no-ext-diff --no-textconv``; ``status`` and ``diff`` ignore dirty
  submodules; every ``GIT_*`` variable of Chorus's own environment is dropped
  (it might name an external diff, a pager or other config) but the three that
  choose the config files; editors are ``:``, askpass is empty, terminal
  prompts are off, and ``PATH`` keeps absolute folders only (so ``cat`` and
  ``false`` are never the repository's own).
* **Only builtins Chorus needs** (:data:`SUBCOMMANDS`): an alias is never reached.
* **No git child in another folder:** the listing is made where the command runs,
  and a child git elsewhere would see another config (an ``includeIf`` of the new
  worktree's branch, say). So a worktree is added ``--no-checkout`` and checked
  out by ``reset --hard`` run inside it, and ``worktree remove`` is ``--force``d
  after Chorus's own status check (git's own check runs ``status`` in the worktree).

Limits: the listing and the run are two processes; a body running *at the same
time* that can write the repository's config could add a new program key in
between (the sandbox makes a worktree job's main ``.git/config`` read-only). A
filter git-lfs would have applied is not applied either.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chorus.worktrees._errors import GitError

#: The git subcommands Chorus runs: builtins only, so no alias can shadow one.
SUBCOMMANDS = frozenset(
    {
        "add",
        "branch",
        "check-ref-format",
        "commit",
        "config",
        "diff",
        "log",
        "merge",
        "reset",
        "rev-list",
        "rev-parse",
        "status",
        "symbolic-ref",
        "worktree",
    }
)
#: Chorus's own environment variables that git still sees: which config files exist.
_KEPT_GIT_VARS = frozenset({"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"})
_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_ASKPASS": "",
}
#: Settings for every run, whatever the config files say.
_FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("log.showSignature", "false"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "dirty"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    ("protocol.allow", "never"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
#: Keys that name a program (matched whole, case-insensitively) and their inert value.
_INERT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), value)
    for pattern, value in (
        (r"core\.hookspath", "/dev/null"),
        (r"core\.fsmonitor", "false"),
        (r"core\.pager", "cat"),
        (r"pager\.[^.]+", "false"),
        (r"core\.editor|sequence\.editor", ":"),
        (r"core\.(askpass|sshcommand|gitproxy|alternaterefscommand)", ""),
        (r"filter\..+\.(clean|smudge|process)", ""),
        (r"filter\..+\.required", "false"),
        (r"diff\.external|diff\..+\.command", ""),
        (r"diff\..+\.textconv", "cat"),
        (r"merge\..+\.driver", "false"),
        (r"credential\.(.+\.)?helper", ""),
        (r"gpg\.(.+\.)?program", "false"),
        (r"gpg\.ssh\.defaultkeycommand", ""),
        (r"remote\..+\.uploadpack", "git-upload-pack"),
        (r"remote\..+\.receivepack", "git-receive-pack"),
        (r"remote\..+\.vcs", ""),
        (r"protocol\.(.+\.)?allow", "never"),
        (r"submodule\..+\.update", "none"),
        (r"hook\..+\.command", ""),
        (r"trailer\..+\.(command|cmd)", ""),
        (r"uploadpack\.packobjectshook", ""),
    )
)
#: Flags each subcommand always gets (they come right after the subcommand's name).
_FLAGS: dict[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "status": ("--ignore-submodules=dirty",),
}
#: The identity of Chorus's own commits when the repository has none configured.
FALLBACK_IDENTITY = (("user.name", "Chorus"), ("user.email", "chorus@localhost"))
Settings = Sequence[tuple[str, str]]
_Done = subprocess.CompletedProcess[str]


def inert_value(key: str) -> str | None:
    """The value that makes ``key`` run nothing, or None when it names no program."""
    return next((value for pattern, value in _INERT if pattern.fullmatch(key)), None)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(_ENV)
    # Only absolute folders: an empty or relative entry would find ``cat`` or ``false``
    # (the inert values) in the repository itself.
    paths = env.get("PATH", os.defpath).split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in paths if os.path.isabs(p))
    return env


def _env(settings: Settings) -> dict[str, str]:
    env = _base_env()
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for n, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


def _git(cwd: Path, argv: Sequence[str], env: dict[str, str], timeout: float) -> _Done:
    command = ["git", "--no-pager", "-C", str(cwd), *argv]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _listed_keys(cwd: Path, timeout: float) -> _Done:
    """Every config key git sees in ``cwd``, NUL-separated (a read: runs nothing;
    an include of a FIFO could only make it wait, so not for long)."""
    argv = ["config", "--list", "--name-only", "-z"]
    return _git(cwd, argv, _env(()), min(timeout, 30.0))


def overrides(keys: Sequence[str]) -> list[tuple[str, str]]:
    """The inert setting for each of ``keys`` that names a program."""
    found = ((key, inert_value(key)) for key in dict.fromkeys(keys))
    return [(key, value) for key, value in found if value is not None]


def run(
    cwd: Path,
    *args: str,
    check: bool = True,
    timeout: float = 300.0,
    settings: Settings = (),
) -> _Done:
    """``git -C cwd args`` with nothing of the repository's executed (see the module's
    docstring); ``settings`` are extra ``key=value`` config (e.g. an identity).
    Raises :class:`GitError` on a non-zero exit when ``check``; when git cannot
    even list the config there, the command is not run and that failure is its
    result."""
    if not args or args[0] not in SUBCOMMANDS:
        raise ValueError(f"Chorus does not run `git {args[0] if args else ''}`")
    done = _listed_keys(cwd, timeout)
    if done.returncode == 0:
        every = [*_FIXED, *overrides(done.stdout.split("\0")), *settings]
        argv = [args[0], *_FLAGS.get(args[0], ()), *args[1:]]
        done = _git(cwd, argv, _env(every), timeout)
    if check and done.returncode != 0:
        raise GitError(list(args), done.returncode, done.stderr)
    return done


def out(cwd: Path, *args: str) -> str:
    """The stripped stdout of a git command that must succeed."""
    return run(cwd, *args).stdout.strip()


def toplevel(path: Path) -> Path | None:
    """The top level git resolves for ``path`` (None outside a repository)."""
    done = run(path, "rev-parse", "--show-toplevel", check=False)
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def git_dir(path: Path) -> Path:
    return Path(out(path, "rev-parse", "--path-format=absolute", "--git-dir"))


def main_checkout(path: Path) -> Path:
    """The main checkout of the repository ``path`` is in (also from a linked worktree)."""
    common = Path(out(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    return common.parent.resolve()


def current_branch(path: Path) -> str | None:
    """The branch checked out at ``path``; None on a detached HEAD."""
    done = run(path, "symbolic-ref", "--short", "-q", "HEAD", check=False)
    return done.stdout.strip() or None


def commit_of(path: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None."""
    done = run(path, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() or None


def branch_exists(path: Path, name: str) -> bool:
    return commit_of(path, f"refs/heads/{name}") is not None


def valid_branch_name(path: Path, name: str) -> bool:
    return run(path, "check-ref-format", "--branch", name, check=False).returncode == 0


def changes(path: Path, skip: Sequence[str] = ()) -> list[str]:
    """``git status --porcelain`` lines: uncommitted and untracked (not ignored)
    files, leaving out the paths in ``skip``."""
    args = ["status", "--porcelain", "--untracked-files=all", *outside(skip)]
    text = run(path, *args).stdout
    return [line for line in text.split("\n") if line]


def outside(skip: Sequence[str]) -> list[str]:
    """Pathspecs for "everything but ``skip``" (each taken literally)."""
    return ["--", ".", *(f":(exclude,literal){p}" for p in skip)] if skip else []


def commits_between(path: Path, since: str, until: str) -> list[str]:
    """One line (short hash and subject) per commit in ``until`` and not in ``since``."""
    text = out(path, "log", "--format=%h %s", f"{since}..{until}")
    return [line for line in text.split("\n") if line]


def has_identity(path: Path) -> bool:
    return run(path, "config", "user.email", check=False).returncode == 0


def identity(path: Path) -> Settings:
    """Config for a commit: none when the repository or the person has an identity."""
    return () if has_identity(path) else FALLBACK_IDENTITY


def merge_drivers(path: Path) -> list[str]:
    """The merge drivers the config names (Chorus's merges never run one)."""
    done = run(path, "config", "--name-only", "--get-regexp", r"^merge\..+\.driver$", check=False)
    return [line for line in done.stdout.split("\n") if line]


def diff_of(folder: Path, *args: str, timeout: float = 300.0) -> str:
    """``git diff args`` in ``folder`` (nothing external, no textconv); empty when
    ``folder`` is no repository or git fails."""
    try:
        done = run(folder, "diff", *args, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of ``git worktree list --porcelain``."""

    path: Path
    head: str
    branch: str | None
    locked: bool
    prunable: bool


def worktrees(path: Path) -> list[Listed]:
    """Every worktree git has registered for the repository (the main one first)."""
    blocks = out(path, "worktree", "list", "--porcelain").split("\n\n")
    return [_listed(block) for block in blocks if block.strip()]


def _listed(block: str) -> Listed:
    fields: dict[str, str] = {}
    for line in block.split("\n"):
        key, _, value = line.partition(" ")
        fields[key] = value
    branch = fields.get("branch", "").removeprefix("refs/heads/") or None
    return Listed(
        path=Path(fields["worktree"]),
        head=fields.get("HEAD", ""),
        branch=branch,
        locked="locked" in fields,
        prunable="prunable" in fields,
    )
