"""An OS sandbox around every body Chorus starts (Linux: bubblewrap; macOS:
``sandbox-exec``), built from ``policy.toml``: writable are the allowed roots, the
folders the body's CLI keeps its state in and a private temporary folder;
everything else is read-only (the rest of the home, the shared ``/tmp``, the
memory and workspace folders, a worktree's main repository but for what a commit
writes), ``CHORUS_HOME`` and denied paths hidden, home secrets too. The policy's
parser asks and scores; the sandbox is what holds when it is wrong."""

from chorus.sandbox._build import (
    SHARED,
    Mode,
    active,
    bwrap_path,
    layout,
    seatbelt_path,
    tool_path,
    write_wrapper,
)
from chorus.sandbox._bwrap import Layout, argv, outermost
from chorus.sandbox._git import GitPaths, git_paths
from chorus.sandbox._seatbelt import profile, seatbelt_argv
from chorus.sandbox._state import state_cli

__all__ = [
    "SHARED",
    "GitPaths",
    "Layout",
    "Mode",
    "active",
    "argv",
    "bwrap_path",
    "git_paths",
    "layout",
    "outermost",
    "profile",
    "seatbelt_argv",
    "seatbelt_path",
    "state_cli",
    "tool_path",
    "write_wrapper",
]
