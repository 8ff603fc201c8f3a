"""What the daemon loads before it serves: not the talk transcript readers (every CLI's
codec and the ACP SDK's schema: most of its start-up CPU), not the MCP SDK, not the
dashboard's Markdown and code colouring, not the policy's engine. They load when first
used (a talk, a page, the first job: the MCP SDK of its body's channel, the engine of
its gate); the routed bodies' code and the engine load in the warm-up of a daemon
``chorus start`` started, once it serves. The packages whose public names load their
private modules on first use still give every name of their ``__all__``."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Loaded on first use, never to start serving.
LATER = (
    "acp",
    "chorus.bodies._talk",
    "chorus.bodies.gemini",
    "markdown_it",
    "pygments",
    "mcp",
    "chorus.policy._engine",
    "chorus.policy._native_flags",
    "chorus.policy._native_rules",
)
#: Packages whose public names load their private modules on first use.
LAZY_PACKAGES = (
    "chorus.config",
    "chorus.policy",
    "chorus.routines",
    "chorus.session",
    "chorus.store",
)


def loaded_by(module: str) -> set[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout))


def later(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == n or m.startswith(n + ".") for n in LATER)}


def test_the_daemon_serves_before_loading_what_waits_for_first_use() -> None:
    assert later(loaded_by("chorus.daemon._server")) == set()


@pytest.mark.parametrize(
    ("module", "needs"),
    [
        ("chorus.bodies._talk", "acp"),
        ("chorus.dashboard._render; chorus.dashboard._render.markdown_html('x')", "markdown_it"),
        ("chorus.daemon._warmup; chorus.daemon._warmup._channel_sdk()", "mcp"),
        ("chorus.daemon._warmup; chorus.daemon._warmup._policy_engine()", "chorus.policy._engine"),
        (
            "chorus.policy, chorus.session; chorus.session.PolicyGuards("
            "chorus.policy.Policy()).gate(session_id='s', cwd=None, mode=None)",
            "chorus.policy._engine",
        ),
    ],
)
def test_the_check_sees_them_when_used(module: str, needs: str) -> None:
    assert needs in later(loaded_by(module))


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_of_a_lazy_package_resolves(package: str) -> None:
    """Each name of ``__all__`` is there (``from package import name`` works) and is
    its private module's object; a name that is not there says so."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        source, attr = module._LAZY[name]
        assert value is getattr(importlib.import_module(source), attr), name
    assert set(module._LAZY) == set(module.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = module.nothing_here


def test_the_first_job_loads_the_mcp_sdk_and_the_audit_key_once(tmp_path: Path) -> None:
    """At the first job's start the MCP SDK and the audit chain's key load in a thread
    (the job goes on meanwhile); later jobs start no second load."""
    code = """
import asyncio, json, sys
from chorus.daemon._warmup import first_job_warms_up
from chorus.policy import AuditLog

async def main():
    audit = AuditLog(anchor=False)
    started = first_job_warms_up(audit)
    before = ["mcp" in sys.modules, audit._key is not None]
    await started(None)
    await started(None)
    loads = [t for t in asyncio.all_tasks() if t.get_name() == "first-job-warm-up"]
    await asyncio.gather(*loads)
    after = ["mcp.server.mcpserver" in sys.modules, audit._key is not None]
    print(json.dumps([before, len(loads), after]))

asyncio.run(main())
"""
    env = {**os.environ, "CHORUS_HOME": str(tmp_path / "home"), "CHORUS_KEYRING": "file"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
        env=env,
    )  # fmt: skip
    assert json.loads(done.stdout) == [[False, False], 1, [True, True]]
