"""The teams page's data (the teams, read-only): members with what waits for
them, and the mailbox traffic, from the team files and the store."""

from __future__ import annotations

from typing import Any

from chorus.store import Store


async def team_views(store: Store) -> list[dict[str, Any]]:
    """Each team with its members and how many unacked messages wait for each."""
    from chorus.teams import TeamError, list_teams, load_team

    views: list[dict[str, Any]] = []
    for name in list_teams():
        try:
            team = load_team(name)
        except TeamError as exc:
            views.append({"name": name, "error": str(exc), "members": []})
            continue
        unacked = await store.list_messages(name, unacked=True)
        members = [
            {
                "name": member,
                "body": spec.body,
                "role": spec.role,
                "waiting": sum(1 for m in unacked if m.recipient == member),
            }
            for member, spec in team.members.items()
        ]
        views.append({"name": name, "coordinator": team.coordinator, "members": members})
    return views


async def team_messages(store: Store, team: str, *, after: int = 0) -> list[dict[str, Any]]:
    """The team's messages with a ``seq`` above ``after`` (the page polls with it)."""
    rows = await store.list_messages(team, limit=None)
    return [
        {
            "seq": m.seq,
            "sender": m.sender,
            "recipient": m.recipient,
            "kind": m.kind,
            "body": m.body,
            "state": m.state,
            "created_at": m.created_at,
        }
        for m in rows
        if m.seq > after
    ]
