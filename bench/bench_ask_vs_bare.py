"""`chorus ask` against the bare CLI on the same scripted scenario, side by side.

One run measures both configurations, each in a fresh ``CHORUS_HOME`` started with
``chorus start`` (timed: the median of that start and of ``--rounds`` more, each on a
fresh home of its own): the default (no spares) and ``[daemon] spare_bodies =
true``. Per body (claude, codex, gemini), each round on the same one-tool scenario
(a shell command, then an answer), with the daemon already running as in everyday
use:

* cold: `chorus ask` on a new session / the bare CLI's one-shot run
  (`claude -p`, `codex exec`, `gemini -p`, pointed at the same server the same way
  the tests point them, in the caller's environment as a body of Chorus is);
* first text: the time from the command's start to the answer's text on its
  stdout, for the same two commands;
* warm: a follow-up `chorus ask --session S` on the live session / the bare CLI's
  own follow-up (`--resume <id>`; Codex: `exec resume <id>`).

Before the rounds, one unmeasured `chorus ask` per body loads its code in the daemon
and (with spares) primes the first spare; its time is printed as "first job".
Then `chorus status --json` and `chorus jobs --json` latency (process start, one
request on the socket), in ms. Targets: cold <= 1.05x, first text <= 1.05x, warm
<= 0.6x, status/jobs <= 100 ms; with a spare, cold <= 0.5x.

    uv run python bench/bench_ask_vs_bare.py [--body claude,codex,gemini] [--rounds N]
        [--configs default,spares]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import bench_home

from chorus.agents import find_agent
from chorus.daemon import DaemonClient
from chorus.testing import GEMINI_MODEL, ModelServer, headless_argv, offline_env, shell, text

ANSWER = "bench-answer-7f3a"
SCENARIO = [shell("echo hi > out.txt"), text(ANSWER)]
EXTRACTED = text("[]")  # memory extraction's answer: nothing to remember
CHORUS = str(Path(sys.executable).with_name("chorus"))
CONFIGS = {"default": "", "spares": "spare_bodies = true"}
#: The model the bare command line names (``headless_argv``), named to Chorus too, so
#: that both sides run the same model setting (Gemini's default, "auto", adds a
#: routing call to every turn).
MODELS = {"gemini": GEMINI_MODEL}


def _timed(argv: list[str], **kw: Any) -> tuple[float, float, str]:
    """(seconds to the end, seconds to the answer's text on stdout, stdout)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )
    assert proc.stdout is not None
    first, lines = float("nan"), []
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        if ANSWER in line and first != first:  # the first line that carries the text
            first = time.perf_counter() - started
        lines.append(line)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = proc.wait()
    elapsed = time.perf_counter() - started
    out = "".join(lines)
    assert code == 0, out[-500:] + err[-800:]
    return elapsed, first, out


def _native_id(cli: str, stdout: str) -> str:
    for line in stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        found = event.get("session_id") or event.get("thread_id")
        if found:
            return str(found)
    raise AssertionError(f"no session id in {cli}'s output")


def _resume_argv(cli: str, argv: list[str], native: str) -> list[str]:
    if cli == "codex":  # codex exec [flags] resume <id> <prompt>
        return [*argv[:-1], "resume", native, argv[-1]]
    if cli == "gemini":
        return [*argv, "--resume", "latest"]
    return [*argv, "--resume", native]


def _bare(cli: str, root: Path, server: ModelServer, work: Path, n: int) -> dict[str, float]:
    """The one-shot run and its own follow-up by native resume."""
    server.script(SCENARIO * 2, lane="bare")
    # The same environment a body of Chorus gets (the caller's, with the CLI's offline
    # settings over it): a person's shell has it too, and it costs the CLI at its start
    # (NODE_EXTRA_CA_CERTS, set here, makes Node read a CA bundle: 30 ms).
    offline = offline_env(cli, root / f"{cli}-bare-{n}", server.lane_url("bare"))  # type: ignore[arg-type]
    env = {**os.environ, **offline}
    argv = headless_argv(cli, find_agent(cli), "make out.txt")  # type: ignore[arg-type]
    cold, first, out = _timed(argv, cwd=work, env=env)
    warm, _, _ = _timed(_resume_argv(cli, argv, _native_id(cli, out)), cwd=work, env=env)
    return {"cold": cold, "first": first, "warm": warm}


def _chorus(cli: str, server: ModelServer, work: Path) -> dict[str, float]:
    """`chorus ask` on a new session, then a follow-up on the same live session. After
    each job, memory extraction (on by default) makes one model call of its own on the
    same lane: it is given its own reply and awaited, off the clock, so that each job
    gets the whole scenario and runs alone, as the bare CLI's does."""
    server.script([*SCENARIO, EXTRACTED] * 2, lane=cli)
    base = [CHORUS, "ask", "make out.txt", "--json"]
    model = ["--model", MODELS[cli]] if cli in MODELS else []
    cold, first, out = _timed([*base, "--body", cli, *model], cwd=work, env=os.environ.copy())
    _await_extraction(server, cli, left=len(SCENARIO) + 1)
    session = json.loads(out.splitlines()[-1])["session_id"]
    warm, _, _ = _timed([*base, "--session", session], cwd=work, env=os.environ.copy())
    _await_extraction(server, cli, left=0)
    return {"cold": cold, "first": first, "warm": warm}


def _await_extraction(server: ModelServer, lane: str, left: int, timeout: float = 60) -> None:
    """Until the job's memory extraction took its reply, and a moment for it to end."""
    deadline = time.monotonic() + timeout
    while server.remaining_turns(lane) > left:
        if time.monotonic() > deadline:
            raise AssertionError(f"memory extraction made no model call in {timeout:.0f}s")
        time.sleep(0.05)
    time.sleep(0.5)


def _wait_for_spare(cli: str, timeout: float = 90) -> int:
    """The waiting spare's process id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for spare in DaemonClient().status().get("spare_bodies", []):
            if spare["body"] == cli:
                return int(spare["pid"])
        time.sleep(0.05)
    raise AssertionError(f"no spare {cli} body after {timeout:.0f}s")


def _tree_rss_mb(root: int) -> float:
    """RSS of ``root`` and every process below it (the CLI, its sandbox, its helpers)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [child for child, up in parent.items() if up == pid and child not in tree]
    return sum(_rss_mb(pid) for pid in tree)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def _client_latency(work: Path, rounds: int) -> dict[str, float]:
    """Median seconds of `chorus status --json` and `chorus jobs --json`."""
    out: dict[str, list[float]] = {"status": [], "jobs": []}
    for _ in range(rounds):
        for name in out:
            out[name].append(_timed([CHORUS, name, "--json"], cwd=work)[0])
    return {name: _median(samples) for name, samples in out.items()}


def _config_run(name: str, clis: list[str], rounds: int) -> dict[str, Any]:
    """Everything measured in one fresh home with configuration ``name``."""
    result: dict[str, Any] = {"bodies": {}}
    with bench_home(tuple(clis), extra=CONFIGS[name]) as (server, work, root):
        starts = [_timed([CHORUS, "start"], cwd=work)[0]]
        for cli in clis:
            result["bodies"][cli] = _body_rounds(name, cli, rounds, server, work, root)
        result |= _client_latency(work, max(rounds, 5) * 2)
    result["start"] = _median(starts + _fresh_starts(name, clis, rounds))
    return result


def _fresh_starts(name: str, clis: list[str], n: int) -> list[float]:
    """Seconds of ``chorus start`` on ``n`` more fresh homes of configuration ``name``
    (one sample says little: a start is a few hundred ms)."""
    out = []
    for _ in range(n):
        with bench_home(tuple(clis), extra=CONFIGS[name]) as (_, work, _):
            out.append(_timed([CHORUS, "start"], cwd=work)[0])
    return out


def _body_rounds(
    name: str, cli: str, rounds: int, server: ModelServer, work: Path, root: Path
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    first_job = _chorus(cli, server, work)["cold"]  # loads the body's code (and a spare)
    for n in range(rounds):
        bare = _bare(cli, root, server, work, n)
        if name == "spares":
            time.sleep(1.0)  # let the spare settle after its boot
            samples.setdefault("spare_mb", []).append(_tree_rss_mb(_wait_for_spare(cli)))
        ours = _chorus(cli, server, work)
        for key in ("cold", "first", "warm"):
            samples.setdefault(f"bare_{key}", []).append(bare[key])
            samples.setdefault(key, []).append(ours[key])
    return {"first_job": first_job, **{k: _median(v) for k, v in samples.items()}}


def _print(name: str, result: dict[str, Any]) -> None:
    print(f"\n[{name}] chorus start {result['start'] * 1000:.0f} ms;", end=" ")
    print(f"chorus status {result['status'] * 1000:.0f} ms; jobs {result['jobs'] * 1000:.0f} ms")
    print(f"{'body':7} {'cold':>22} {'first text':>22} {'warm':>22} {'first job':>10}")
    for cli, r in result["bodies"].items():
        cells = [
            f"{r[k] / r['bare_' + k]:.2f}x ({r[k]:.2f}/{r['bare_' + k]:.2f}s)"
            for k in ("cold", "first", "warm")
        ]
        spare = f"  spare {r['spare_mb']:.0f} MB" if "spare_mb" in r else ""
        print(
            f"{cli:7} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22} {r['first_job']:>9.2f}s{spare}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body", default="claude,codex,gemini")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="default,spares")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"ratios are chorus / bare (medians of {args.rounds}); load average {load:.2f}")
    results = {}
    for name in args.configs.split(","):
        results[name] = _config_run(name, args.body.split(","), args.rounds)
        _print(name, results[name])
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
