"""Codex bodies without a process: declared capabilities, command lines, control guards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chorus._errors import UserError
from chorus.bodies import BodyOptions, Support, body_class
from chorus.bodies.codex import APP_SERVER_ARGS, CodexBody, CodexExecBody

REPO = Path(__file__).resolve().parents[3]


def _options(tmp_path: Path, **kw: object) -> BodyOptions:
    return BodyOptions(cwd=tmp_path, executable=Path("/opt/codex"), **kw)  # type: ignore[arg-type]


def test_registry_names_resolve_to_the_bodies() -> None:
    assert body_class("codex") is CodexBody
    assert body_class("codex-exec") is CodexExecBody
    assert (CodexBody.name, CodexExecBody.name) == ("codex", "codex-exec")


def test_declared_capabilities() -> None:
    app = CodexBody.capabilities
    native = {name for name, value in app.as_dict().items() if value == Support.NATIVE}
    assert native == {
        "interrupt",
        "set_model",
        "set_permission_mode",
        "steer",
        "permission_callback",
        "resume",
        "fork",
        "usage",
        "rate_limit_signal",
    }
    exec_ = CodexExecBody.capabilities
    assert exec_.steer == exec_.permission_callback == Support.UNSUPPORTED
    assert exec_.interrupt == exec_.set_model == Support.EMULATED
    assert exec_.resume == Support.NATIVE


def test_app_server_runs_offline_safe() -> None:
    assert APP_SERVER_ARGS == (
        "app-server",
        "--disable",
        "plugins",
        "--disable",
        "unbounded_connection_retries",
    )


def test_exec_command_lines(tmp_path: Path) -> None:
    body = CodexExecBody(_options(tmp_path, permission_mode="default", model="gpt-5.5"))
    first = body.argv()
    assert first[:3] == ["/opt/codex", "exec", "--json"]
    assert "--skip-git-repo-check" in first
    assert first[first.index("-c") + 1] == 'sandbox_mode="workspace-write"'
    assert first[first.index("-m") + 1] == "gpt-5.5"
    assert first[-2:] == ["--", "-"]  # the prompt is read from stdin
    resumed = CodexExecBody(_options(tmp_path, permission_mode="bypassPermissions", resume="T1"))
    argv = resumed.argv()
    assert argv[1:3] == ["exec", "resume"]
    assert "--dangerously-bypass-approvals-and-sandbox" in argv
    assert "-c" not in argv
    assert argv[-3:] == ["--", "T1", "-"]


async def test_controls_between_turns(tmp_path: Path) -> None:
    body = CodexBody(_options(tmp_path))
    await body.interrupt()  # nothing running: a no-op
    with pytest.raises(UserError):
        await body.steer("more")
    with pytest.raises(UserError):
        await body.set_permission_mode("yolo")
    await body.set_permission_mode("plan")
    assert body.permission_mode == "plan"
    with pytest.raises(UserError):
        CodexBody(_options(tmp_path, permission_mode="nope"))


async def test_exec_controls_apply_to_the_next_run(tmp_path: Path) -> None:
    body = CodexExecBody(_options(tmp_path))
    await body.set_model("gpt-5.4")
    await body.set_permission_mode("plan")
    argv = body.argv()
    assert argv[argv.index("-m") + 1] == "gpt-5.4"
    assert 'sandbox_mode="read-only"' in argv
    await body.interrupt()  # nothing running: a no-op


@pytest.mark.e2e
def test_generated_schema_is_current() -> None:
    """``_schema.py`` matches what the pinned CLI generates today (catches CLI upgrades)."""
    pytest.importorskip("datamodel_code_generator")
    script = REPO / "scripts" / "gen_codex_schema.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    if "AgentNotFoundError" in done.stderr:
        pytest.skip("the pinned codex CLI is not installed")
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_app_server_body_takes_the_policy_s_roots_from_its_options(tmp_path: Path) -> None:
    options = BodyOptions(cwd=tmp_path, extra={"allowed_roots": ("/srv/a", "/srv/b")})
    assert CodexBody(options)._codec.writable_roots == ("/srv/a", "/srv/b")
    assert CodexBody(BodyOptions(cwd=tmp_path))._codec.writable_roots == ()
