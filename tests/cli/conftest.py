"""The daemon tests' fixtures (a CHORUS_HOME wired to the scripted model server and a
``chorus`` runner), shared with the CLI's end-to-end tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "chorus_daemon_conftest", Path(__file__).parents[1] / "daemon" / "conftest.py"
)
assert _spec is not None
assert _spec.loader is not None
_daemon = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _daemon
_spec.loader.exec_module(_daemon)

Chorus = _daemon.Chorus
write_config = _daemon.write_config
chorus = _daemon.chorus
daemon_with = _daemon.daemon_with
module_chorus = _daemon.module_chorus
shared_chorus = _daemon.shared_chorus
module_daemon = _daemon.module_daemon
shared_daemon = _daemon.shared_daemon
