"""An OS sandbox around every body Chorus starts (Linux: bubblewrap), built from
``policy.toml``: the allowed roots, the CLI's home and the temporary folder are
writable, everything else read-only, ``CHORUS_HOME`` and denied paths hidden.
The policy's parser asks and scores; the sandbox is what holds when it is wrong."""

from chorus.sandbox._build import SHARED, Mode, active, bwrap_path, layout, write_wrapper
from chorus.sandbox._bwrap import Layout, argv, outermost

__all__ = [
    "SHARED",
    "Layout",
    "Mode",
    "active",
    "argv",
    "bwrap_path",
    "layout",
    "outermost",
    "write_wrapper",
]
