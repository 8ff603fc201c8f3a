"""The fast path of the console entry point: the everyday commands parsed from argv
by hand, so that they reach the daemon's socket without loading typer, rich or
pydantic. Anything this parser does not know (``--help``, a typo, another
command) falls through to the typer app, which owns help and error messages.

The tables below are the one declaration of these commands: the typer commands
are built from them too (``_everyday``), and both parsers hand the same values to
the same runner (:data:`RUN`).
"""

from __future__ import annotations

from chorus._errors import UserError

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_JOB_OPTIONS = {
    "--body": "body",
    "-b": "body",
    "--model": "model",
    "-m": "model",
    "--cwd": "cwd",
    "--session": "session",
    "-s": "session",
    "--permission-mode": "mode",
    "--branch": "branch",
    "--base": "base",
    "--framework": "framework",
    "--planners": "planners",
    "--reviewer": "reviewer",
    "--rounds": "rounds",
}
_JOB_FLAGS = {
    "--json": "as_json",
    "--worktree": "worktree",
    "--no-worktree": "no_worktree",
    "--no-failover": "no_failover",
}


#: Help of each option by destination, shared with the typer commands (``_daemon_cmd``).
HELP = {
    "body": "claude, codex, gemini, ... (default: routed)",
    "model": "Model for the body.",
    "cwd": "Working directory (default: here).",
    "session": "Continue this Chorus session (id or prefix).",
    "mode": "default|acceptEdits|plan|bypassPermissions (default: the policy's mode)",
    "fmt": "text (the answer only; default when piped), events (default on a terminal), json",
    "as_json": "Print JSON (ask, watch: the events, one per line).",
    "state": "Only jobs in this state.",
    "worktree": "Run in a git worktree of its own (default: [daemon] worktree).",
    "no_worktree": "Run in the folder itself even when [daemon] worktree = auto.",
    "branch": "The worktree's branch (default chorus/<job>-<slug>).",
    "base": "Start the worktree from REF (default: HEAD's branch).",
    "framework": "direct|consensus|reflect|sequential|script|auto (default: direct)",
    "planners": "consensus: bodies that plan, e.g. claude,codex,gemini",
    "reviewer": "reflect: the body that reviews.",
    "rounds": "reflect: at most this many reviews (1-5).",
    "team": "Steer a team's member instead of a job (then TEXT is the only argument).",
    "member": "The team's member, with --team.",
    "no_failover": "On a quota error fail the job instead of moving it to another body.",
    "limit": "Show at most this many sessions, newest first.",
    "cancel_jobs": "Cancel running and queued jobs instead of keeping them.",
    "keep_bodies": "Leave the agent CLIs running (e.g. to upgrade Chorus); the next start "
    "re-attaches to them and running turns carry on.",
}

#: Help of positional arguments, by command (the typer commands show it).
ARGUMENT_HELP = {
    "steer": {
        "job_id": "The job (id or unique prefix); with --team: TEXT.",
        "text": "What to tell the running turn.",
    },
    "watch": {"job_id": "Default: the newest job."},
    "log": {"job_id": "The job, or a session (id or unique prefix)."},
    "interrupt": {"job_id": "The job (id or unique prefix)."},
}

#: Each command's help, shared with the typer commands.
SUMMARY = {
    "ask": "Run a job and stream it until it ends. Ctrl-C interrupts the job.\n\n"
    "Exit code: 0 succeeded, 1 failed, 3 cancelled or interrupted, 2 bad input.",
    "task": "Queue a job and print its id at once (fire and forget).",
    "watch": "Follow a job's events (default: the newest). Ctrl-C detaches; the job goes on.",
    "steer": "Add text to a job's running turn; a finished job gets it as a follow-up.\n\n"
    "Natively where the body can, else emulated. Unknown job: exit 2, nothing written.",
    "jobs": "List jobs, oldest first (reads the log; never starts a daemon).",
    "status": "Daemon state, job counts, every configured body's health, the gateway.",
    "start": "Start the daemon for this CHORUS_HOME (it also starts by itself on first use).",
    "log": "Print a job's events so far, without following (never starts a daemon); "
    "given a session, the whole session's: job by job and the turns had in `chorus talk`.",
    "sessions list": "List recorded sessions, newest first.",
    "stop": "Stop the daemon; says which jobs are left (they resume at the next start).\n\n"
    "With --cancel-jobs, running and queued jobs are cancelled first. Agent CLIs that "
    "a daemon left running (killed, or stopped with --keep-bodies) are ended too, "
    "unless --keep-bodies is given.",
    "interrupt": "Interrupt a running job (or cancel a queued one).",
}


class Spec:
    """A command's argv shape: positionals (how many required), options, flags; the
    options that take a whole number, with their defaults (``numbers``); help that
    differs from :data:`HELP` for this command (``helps``).
    (A plain class: ``dataclasses`` would cost the fast path its import.)"""

    def __init__(
        self,
        positionals: tuple[str, ...],
        required: int,
        options: dict[str, str] | None = None,
        flags: dict[str, str] | None = None,
        *,
        numbers: dict[str, int] | None = None,
        helps: dict[str, str] | None = None,
    ) -> None:
        self.positionals = positionals
        self.required = required
        self.options = options or {}
        self.flags = flags or {"--json": "as_json"}
        self.numbers = numbers or {}
        self.helps = helps or {}

    def help(self, dest: str) -> str:
        return self.helps.get(dest, HELP[dest])


SPECS: dict[str, Spec] = {
    "ask": Spec(("prompt",), 1, {**_JOB_OPTIONS, "--format": "fmt"}, dict(_JOB_FLAGS)),
    "task": Spec(("prompt",), 1, dict(_JOB_OPTIONS), dict(_JOB_FLAGS)),
    "watch": Spec(("job_id",), 0, {"--format": "fmt"}),
    "steer": Spec(("job_id", "text"), 1, {"--team": "team", "--member": "member"}),
    "jobs": Spec((), 0, {"--state": "state"}),
    "status": Spec((), 0),
    "start": Spec((), 0),
    "log": Spec(("job_id",), 1),
    "sessions list": Spec(
        (),
        0,
        {"--limit": "limit"},
        numbers={"limit": 50},
        helps={"as_json": "One JSON array instead of a table."},
    ),
    "stop": Spec(
        (),
        0,
        flags={"--cancel-jobs": "cancel_jobs", "--keep-bodies": "keep_bodies", "--json": "as_json"},
        helps={"as_json": "One JSON object."},
    ),
    "interrupt": Spec(("job_id",), 1, helps={"as_json": "One JSON object."}),
}


def parse(spec: Spec, args: list[str]) -> dict[str, Any] | None:
    """``args`` as keyword values, or None when they are not plainly this command's."""
    values: dict[str, Any] = {dest: False for dest in spec.flags.values()}
    positionals: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            positionals += list(rest)
            break
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if name in spec.flags and not eq:
            values[spec.flags[name]] = True
        elif name in spec.options:
            value = inline if eq else next(rest, None)
            if value is None:
                return None
            values[spec.options[name]] = value
        else:
            return None
    if not spec.required <= len(positionals) <= len(spec.positionals):
        return None
    values.update(zip(spec.positionals, positionals, strict=False))
    return _numbers(spec, values)


def _numbers(spec: Spec, values: dict[str, Any]) -> dict[str, Any] | None:
    """The whole-number options as numbers (their defaults when not given); None when
    one is not a number (typer then says so, as it does for any bad value)."""
    for dest, default in spec.numbers.items():
        try:
            values[dest] = int(values.get(dest, default))
        except ValueError:
            return None
    return values


def _job_opts(v: dict[str, Any]) -> dict[str, Any]:
    opts = {k: v.get(k) for k in ("body", "model", "cwd", "session", "mode")}
    request = {k: v[k] for k in ("branch", "base", "framework", "reviewer") if v.get(k)}
    if v.get("worktree") or v.get("no_worktree"):
        request["worktree"] = bool(v.get("worktree"))
    if v.get("no_failover"):
        request["failover"] = False
    if v.get("planners"):
        request["planners"] = [p.strip() for p in v["planners"].split(",") if p.strip()]
    if v.get("rounds"):
        request["rounds"] = _number(v["rounds"], "--rounds")
    return {**opts, "request": request}


def _number(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"{name} takes a whole number, not {raw!r}") from None


def _steer(v: dict[str, Any]) -> int:
    """``steer JOB TEXT``, or ``steer --team T --member M TEXT``."""
    if v.get("team") is not None or v.get("member") is not None:
        from chorus.cli._team_cmd import steer_member

        text = v["job_id"] if v.get("text") is None else v["text"]
        return steer_member(v.get("team"), v.get("member"), text, v["as_json"])
    if v.get("text") is None:
        raise UserError("missing TEXT: chorus steer JOB TEXT")
    return int(_jobs().steer(v["job_id"], v["text"], v["as_json"]))


def _jobs() -> Any:
    """The commands, loaded only to run one (``--help`` needs no socket client)."""
    from chorus.cli import _jobs as jobs

    return jobs


#: What each command runs, given its values by either parser.
RUN: dict[str, Callable[[dict[str, Any]], int]] = {
    "ask": lambda v: _jobs().ask(v["prompt"], _job_opts(v), v.get("fmt"), v["as_json"]),
    "task": lambda v: _jobs().task(v["prompt"], _job_opts(v), v["as_json"]),
    "watch": lambda v: _jobs().watch(v.get("job_id"), v.get("fmt"), v["as_json"]),
    "steer": lambda v: _steer(v),
    "jobs": lambda v: _jobs().jobs(v.get("state"), v["as_json"]),
    "status": lambda v: _jobs().status(v["as_json"]),
    "start": lambda v: _jobs().start(v["as_json"]),
    "log": lambda v: _jobs().log(v["job_id"], v["as_json"]),
    "sessions list": lambda v: _jobs().sessions_list(v["limit"], v["as_json"]),
    "stop": lambda v: _jobs().stop(v["cancel_jobs"], v["keep_bodies"], v["as_json"]),
    "interrupt": lambda v: _jobs().interrupt(v["job_id"], v["as_json"]),
}


def help_text(name: str) -> str:
    """``chorus NAME --help``, from the tables the typer command is built from too."""
    spec = SPECS[name]
    args = " ".join(
        p.upper() if i < spec.required else f"[{p.upper()}]" for i, p in enumerate(spec.positionals)
    )
    lines = [f"Usage: chorus {name} [OPTIONS] {args}".rstrip(), ""]
    lines.append("\n\n".join(f"  {para}" for para in SUMMARY[name].split("\n\n")))
    lines += ["", "Options:"]
    names: dict[str, list[str]] = {}
    for flag, dest in [*spec.options.items(), *spec.flags.items()]:
        names.setdefault(dest, []).append(flag)
    for dest, flags in names.items():
        value = " TEXT" if dest in spec.options.values() else ""
        value = " INTEGER" if dest in spec.numbers else value
        default = f" [default: {spec.numbers[dest]}]" if dest in spec.numbers else ""
        lines.append(f"  {', '.join(flags) + value:<28} {spec.help(dest)}{default}")
    lines.append(f"  {'--help':<28} Show this message and exit.")
    return "\n".join(lines) + "\n"


def command_of(argv: list[str]) -> tuple[str, list[str]] | None:
    """The table's command ``argv`` names (one word, or two: ``sessions list``) and the
    arguments after it; None when it names none."""
    for words in (2, 1):
        name = " ".join(argv[:words])
        if len(argv) >= words and name in SPECS:
            return name, argv[words:]
    return None


def run(argv: list[str]) -> int | None:
    """Run ``argv`` (without the program name) on the fast path; None to fall through."""
    found = command_of(argv)
    if found is None:
        return None
    name, args = found
    if args == ["--help"]:
        print(help_text(name), end="")
        return 0
    values = parse(SPECS[name], args)
    if values is None:
        return None
    return RUN[name](values)
