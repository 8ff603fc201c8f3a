"""The meter's link socket works in a folder whose path is past ``sun_path``'s limit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chorus.meter._unix import MAX_SOCKET_PATH, socket_path


def _deep(tmp_path: Path) -> Path:
    folder = tmp_path
    while len(str(folder)) < 120:
        folder = folder / "a-long-folder-name"
    folder.mkdir(parents=True)
    return folder / "link.sock"


async def test_a_socket_past_the_limit_is_bound_and_reached_through_its_folder(
    tmp_path: Path,
) -> None:
    path = _deep(tmp_path)
    with pytest.raises(OSError, match="too long"):  # the control: the path is refused
        await asyncio.start_unix_server(lambda r, w: None, path=str(path))

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    with socket_path(path) as where:
        server = await asyncio.start_unix_server(answer, path=where)
    assert path.is_socket()
    with socket_path(path) as where:
        reader, writer = await asyncio.open_unix_connection(where)
    writer.write(b"hello\n")
    assert await reader.readline() == b"hello\n"
    writer.close()
    server.close()
    await server.wait_closed()


def test_a_short_path_is_given_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    assert len(str(path)) <= MAX_SOCKET_PATH
    with socket_path(path) as where:
        assert where == str(path)
