"""Shared set-up for benches: a throwaway CHORUS_HOME wired to the scripted model."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chorus.daemon import stop_daemon
from chorus.testing import ModelServer, offline_env


@contextmanager
def bench_home(clis: tuple[str, ...], extra: str = "") -> Iterator[tuple[ModelServer, Path, Path]]:
    """Yield (server, work dir, tmp root) with CHORUS_HOME set and each CLI on its lane."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp, ModelServer() as server:
        root = Path(tmp)
        home, work = root / "chorus-home", root / "work"
        home.mkdir()
        work.mkdir()
        lines = ["[daemon]", "notifications = false", extra]
        for cli in clis:
            env = offline_env(cli, root / f"{cli}-home", server.lane_url(cli))  # type: ignore[arg-type]
            lines.append(f"[agents.{cli}.env]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        old = os.environ.get("CHORUS_HOME")
        os.environ["CHORUS_HOME"] = str(home)
        try:
            yield server, work, root
        finally:
            stop_daemon()
            if old is None:
                os.environ.pop("CHORUS_HOME", None)
            else:
                os.environ["CHORUS_HOME"] = old


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered):.3f}s  p95 {p95:.3f}s  n={len(ordered)}"


def drive_claude(
    proc: subprocess.Popen[str],
    init: dict[str, Any],
    user: dict[str, Any],
    mcp_answer: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Speak a live Claude's control protocol as the daemon does: ``init`` first, then
    ``user`` once it is answered; each ``mcp_message`` answered with ``mcp_answer`` of
    its message, any other request (a tool's permission) allowed; stop at the result."""
    assert proc.stdin is not None
    assert proc.stdout is not None

    def send(line: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(line) + "\n")
        proc.stdin.flush()

    send(init)
    for raw in proc.stdout:
        line = json.loads(raw)
        kind = line.get("type")
        if kind == "control_response" and line["response"].get("request_id") == init["request_id"]:
            send(user)
        elif kind == "control_request":
            request = line["request"]
            if request.get("subtype") == "mcp_message":
                body: dict[str, Any] = {"mcp_response": mcp_answer(request.get("message", {}))}
            else:  # can_use_tool: allowed
                body = {"behavior": "allow", "updatedInput": request.get("input", {})}
            answer = {"subtype": "success", "request_id": line["request_id"], "response": body}
            send({"type": "control_response", "response": answer})
        elif kind == "result":
            break
    proc.stdin.close()
    proc.wait()
