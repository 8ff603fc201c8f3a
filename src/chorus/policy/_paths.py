"""Filesystem paths as the kernel will see them, checked against the policy's roots.

A path a tool names is resolved twice: *lexically* (``~`` expanded, joined to the
working directory, ``..`` collapsed) and *really* (every symlink followed, as
``open`` would). A path is denied when either form matches a denied pattern,
and allowed only when the real form lies under an allowed root, so neither a
``..`` walk nor a symlink planted inside the project can reach outside it.
Denied patterns are compared case-folded and NFC-normalized: on a
case-insensitive filesystem ``~/.SSH`` is ``~/.ssh``, so a denial must not be
dodged by case (allowed roots stay case-sensitive, erring towards denial).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Files and folders that hold credentials. Reading them is how an agent leaks a
#: key; ``{chorus_home}`` holds the audit log, the secret store and the policy
#: itself, so a body must never edit its own rules.
SENSITIVE_PATHS: tuple[str, ...] = (
    "{chorus_home}",
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube/config",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.config/gh/hosts.yml",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "**/.env",
    "**/.env.*",
    "**/id_rsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/*.pem",
    "**/*.p12",
)

#: The folders under ``{chorus_home}`` that hold the user's work, not Chorus's
#: state: job worktrees (``chorus.worktrees``) and the workspace where
#: routines and the heartbeat run, where jobs must edit files. The
#: ``{chorus_home}`` denial stops at them; every other denial still applies.
HOME_WORKTREES = "worktrees"
HOME_WORK_FOLDERS = (HOME_WORKTREES, "workspace")

_GLOB_CHARS = frozenset("*?[")
_PLACEHOLDERS = ("{cwd}", "{home}", "{tmp}", "{chorus_home}")


class PathSyntaxError(ValueError):
    """A path no tool can legitimately mean (NUL byte, empty)."""


@dataclass(frozen=True, slots=True)
class PathContext:
    """What placeholders in policy paths stand for: ``{cwd}``, ``{home}``, ``{tmp}``,
    ``{chorus_home}``."""

    cwd: Path
    home: Path
    tmp: Path
    chorus_home: Path

    @classmethod
    def current(cls, cwd: Path | None = None, chorus_home: Path | None = None) -> PathContext:
        """The context of this process (``cwd`` and ``chorus_home`` may be overridden)."""
        from chorus.config import chorus_home as default_home

        return cls(
            cwd=Path(cwd or os.getcwd()),
            home=Path.home(),
            tmp=Path(tempfile.gettempdir()),
            chorus_home=chorus_home or default_home(),
        )

    def expand(self, pattern: str) -> str:
        """``pattern`` with placeholders and a leading ``~`` replaced (globs kept)."""
        out = pattern
        for name, value in (
            ("{cwd}", self.cwd),
            ("{home}", self.home),
            ("{tmp}", self.tmp),
            ("{chorus_home}", self.chorus_home),
        ):
            out = out.replace(name, str(value))
        if out == "~" or out.startswith("~/"):
            out = str(self.home) + out[1:]
        return out


def unknown_placeholders(pattern: str) -> list[str]:
    """Placeholders in ``pattern`` that :class:`PathContext` does not know."""
    found: list[str] = []
    start = pattern.find("{")
    while start >= 0:
        end = pattern.find("}", start)
        if end < 0:
            break
        token = pattern[start : end + 1]
        if token not in _PLACEHOLDERS:
            found.append(token)
        start = pattern.find("{", end)
    return found


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """One path in both forms. ``via_symlink`` is true when they differ."""

    raw: str
    lexical: Path
    real: Path

    @property
    def via_symlink(self) -> bool:
        return self.lexical != self.real


def resolve_path(raw: str, ctx: PathContext) -> ResolvedPath:
    """Resolve ``raw`` against ``ctx.cwd``. Raises :class:`PathSyntaxError` for NUL or empty.

    The real form follows symlinks component by component (``link/..`` is the
    parent of the link's *target*, as the kernel does), and works for paths
    that do not exist yet (a file about to be written).
    """
    if not raw or "\x00" in raw:
        raise PathSyntaxError(f"unusable path {raw!r}")
    expanded = ctx.expand(raw)
    joined = expanded if os.path.isabs(expanded) else os.path.join(ctx.cwd, expanded)
    return ResolvedPath(raw, Path(os.path.normpath(joined)), Path(os.path.realpath(joined)))


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


@functools.lru_cache(maxsize=4096)
def _ancestry(path: Path) -> tuple[str, ...]:
    """``path`` and every folder above it, folded (computed once per path: a check
    tries every denied pattern on both forms of each path)."""
    return tuple(_fold(str(p)) for p in (path, *path.parents))


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str, ctx: PathContext) -> Callable[[tuple[str, ...]], bool]:
    """Whether a folded ancestry matches ``pattern``, built once per pattern and context."""
    expanded = ctx.expand(pattern)
    if not _GLOB_CHARS.intersection(expanded):
        target = os.path.normpath(expanded)
        if not os.path.isabs(target):
            target = os.path.normpath(os.path.join(ctx.cwd, target))
        folded = _fold(target)
        return lambda ancestry: folded in ancestry
    glob = re.compile(fnmatch.translate(_fold(expanded.replace("**", "*"))))
    return lambda ancestry: any(glob.match(p) for p in ancestry)


@functools.lru_cache(maxsize=256)
def _matchers(
    patterns: tuple[str, ...], ctx: PathContext
) -> tuple[tuple[str, Callable[[tuple[str, ...]], bool]], ...]:
    return tuple((p, _matcher(p, ctx)) for p in patterns)


def matches_pattern(path: Path, pattern: str, ctx: PathContext) -> bool:
    """True if ``path`` (or a folder containing it) matches the denied ``pattern``.

    Without glob characters the pattern names a file or a folder (everything
    under it matches). ``**`` and ``*`` both match across ``/``.
    """
    return _first_denied((path,), (pattern,), ctx) is not None


def _first_denied(
    paths: tuple[Path, ...], patterns: tuple[str, ...], ctx: PathContext
) -> str | None:
    """The first of ``patterns`` that one of ``paths`` (or a folder above it) matches."""
    forms = [(path, _ancestry(path)) for path in paths]
    for pattern, matches in _matchers(patterns, ctx):
        if any(matches(up) and not _kept(pattern, path, ctx) for path, up in forms):
            return pattern
    return None


def _kept(pattern: str, path: Path, ctx: PathContext) -> bool:
    """``{chorus_home}`` denies Chorus's home, except the work folders inside it."""
    return pattern == "{chorus_home}" and _in_work_folder(path, ctx)


def _in_work_folder(path: Path, ctx: PathContext) -> bool:
    return any(is_under(path, ctx.chorus_home / name) for name in HOME_WORK_FOLDERS)


def is_under(path: Path, root: Path) -> bool:
    """True if ``path`` is ``root`` or inside it (both already resolved)."""
    return path == root or root in path.parents


def root_paths(patterns: list[str], ctx: PathContext) -> list[Path]:
    """Policy roots made real (symlinks followed), so a root that is itself a link works."""
    return [resolve_path(p, ctx).real for p in patterns if p]


@dataclass(frozen=True, slots=True)
class PathVerdict:
    """Outcome of :func:`check_path`: ``ok`` or a ``reason`` and the ``rule`` that fired."""

    ok: bool
    path: ResolvedPath | None
    reason: str = ""
    rule: str = ""


def check_path(
    raw: str,
    ctx: PathContext,
    *,
    allowed: list[str],
    read_only: list[str],
    denied: list[str],
    write: bool,
) -> PathVerdict:
    """Check one path: denied patterns first (both forms), then the allowed roots.

    Writes need an ``allowed`` root; reads may also use a ``read_only`` root.
    """
    try:
        resolved = resolve_path(raw, ctx)
    except PathSyntaxError as exc:
        return PathVerdict(False, None, str(exc), "filesystem.bad_path")
    pattern = _first_denied((resolved.lexical, resolved.real), tuple(denied), ctx)
    if pattern is not None:
        return PathVerdict(
            False,
            resolved,
            f"{_describe(resolved)} matches the denied path {pattern!r}",
            "filesystem.denied_path",
        )
    roots = root_paths(allowed if write else allowed + read_only, ctx)
    if any(is_under(resolved.real, root) for root in roots):
        return PathVerdict(True, resolved)
    kind = "writable" if write else "readable"
    return PathVerdict(
        False,
        resolved,
        f"{_describe(resolved)} is outside the {kind} roots "
        f"({', '.join(str(r) for r in roots) or 'none'})",
        "filesystem.outside_roots",
    )


def _describe(resolved: ResolvedPath) -> str:
    if resolved.via_symlink:
        return f"path {resolved.raw!r} (a symlink to {resolved.real})"
    if str(resolved.lexical) != resolved.raw:
        return f"path {resolved.raw!r} (= {resolved.lexical})"
    return f"path {resolved.raw!r}"


def brain_cwd_problem(
    folder: Path, allowed_cwds: list[str], denied: list[str], ctx: PathContext
) -> str | None:
    """Why a brain may not open a session in ``folder`` (None: it may).

    The session's folder becomes its sandbox's writable root, so a brain that
    could pick ``/``, a denied folder (``CHORUS_HOME``, ``~/.ssh``) or a folder
    outside ``[gateway] allowed_cwds`` (when set) could widen its own sandbox.
    """
    real = resolve_path(str(folder), ctx).real
    if real == Path(real.anchor):
        return "the filesystem root cannot be a session's folder"
    hit = next((p for p in denied if matches_pattern(real, p, ctx)), None)
    if hit is not None:
        return f"{real} matches the denied path {hit!r}"
    roots = root_paths(allowed_cwds, ctx)
    if allowed_cwds and not any(is_under(real, root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        return f"{real} is outside [gateway] allowed_cwds ({shown})"
    return None
