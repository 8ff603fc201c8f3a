"""``chorus worktree list|diff|merge|rm|prune``: the jobs' git worktrees.

Every command goes through the daemon (it knows which jobs run and owns the log).
JOB is a job id or a unique prefix of it. Refusals (unmerged work, a conflict, a
running job) exit 2 and change nothing.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from chorus.cli._app import app

worktree_app = typer.Typer(help="The git worktrees jobs ran in.", no_args_is_help=True)
app.add_typer(worktree_app, name="worktree")
console = Console()
_JSON = typer.Option(False, "--json", help="Print JSON.")


def _client() -> Any:
    from chorus.client import DaemonClient

    return DaemonClient()


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def _state(row: dict[str, Any]) -> str:
    if row["state"] != "removed" and not row.get("exists", True):
        return f"{row['state']} (folder gone)"
    return str(row["state"])


@worktree_app.command("list")
def list_cmd(as_json: bool = _JSON) -> None:
    """Every job worktree: state, commits ahead/behind its base branch, uncommitted files."""
    rows = _client().worktrees()
    if as_json:
        _print_json(rows)
        return
    table = Table("job", "state", "branch", "into", "ahead", "behind", "dirty", "path")
    for row in rows:
        table.add_row(
            row["job_id"][:12],
            _state(row),
            row["branch"],
            row["into"],
            str(row.get("ahead", "-")),
            str(row.get("behind", "-")),
            str(row.get("dirty", "-")),
            row["path"],
        )
    console.print(table)


@worktree_app.command()
def diff(job: str, as_json: bool = _JSON) -> None:
    """What the job's branch changed since it left its base branch."""
    data = _client().worktree(job, "diff")
    if as_json:
        _print_json(data)
    else:
        typer.echo(data["diff"], nl=False)


@worktree_app.command()
def merge(
    job: str,
    squash: bool = typer.Option(False, "--squash", help="One commit instead of a merge."),
    as_json: bool = _JSON,
) -> None:
    """Merge the job's branch into the branch it came from; a conflict aborts it."""
    data = _client().worktree(job, "merge", squash=squash)
    if as_json:
        _print_json(data)
    else:
        typer.echo(f"merged {data['job_id'][:12]} into {data['into']} (now {data['head']})")


@worktree_app.command("rm")
def rm_cmd(
    job: str,
    force: bool = typer.Option(False, "--force", help="Discard unmerged commits and changes."),
    as_json: bool = _JSON,
) -> None:
    """Remove the worktree and its branch: only when clean and merged, unless --force."""
    client = _client()
    if force and not as_json:
        _warn_losses(client.worktree(job))
    data = client.worktree(job, "rm", force=force)
    if as_json:
        _print_json(data)
    else:
        typer.echo(f"removed the worktree of {data['job_id'][:12]}")


def _warn_losses(row: dict[str, Any]) -> None:
    """Before a forced rm: the commits and changes it is about to discard."""
    if row.get("unmerged"):
        typer.echo(f"discarding {len(row['unmerged'])} unmerged commit(s):", err=True)
        for commit in row["unmerged"]:
            typer.echo(f"  {commit}", err=True)
    if row.get("dirty"):
        typer.echo(f"discarding {row['dirty']} uncommitted change(s)", err=True)


@worktree_app.command()
def prune(as_json: bool = _JSON) -> None:
    """Remove every idle worktree that is clean and merged; list the ones kept and why."""
    data = _client().prune_worktrees()
    if as_json:
        _print_json(data)
        return
    for job in data["removed"]:
        typer.echo(f"removed {job[:12]}")
    for kept in data["kept"]:
        typer.echo(f"kept {kept['job_id'][:12]}: {kept['reason']}")
