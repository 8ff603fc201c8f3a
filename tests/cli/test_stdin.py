"""A job's prompt from the command line and a piped stdin (``chorus ask -``,
``git diff | chorus ask "review this"``), checked as UTF-8."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from chorus._errors import UserError
from chorus.cli import _stdin
from chorus.cli._stdin import job_prompt


@pytest.fixture
def pipe() -> Iterator[tuple[BinaryIO, int]]:
    """(the read end as a binary file, the write end's fd)."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    try:
        yield reader, write_fd
    finally:
        reader.close()
        with contextlib.suppress(OSError):
            os.close(write_fd)


def test_a_piped_text_is_attached_to_the_prompt(pipe: tuple[BinaryIO, int]) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"diff --git a/x b/x\n+new line\n")
    os.close(write_fd)
    prompt = job_prompt("review this", reader)
    assert prompt == "review this\n\n<stdin>\ndiff --git a/x b/x\n+new line\n</stdin>"


def test_a_redirected_file_is_attached_too(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the notes\n")
    with (tmp_path / "notes.txt").open("rb") as f:
        assert job_prompt("summarize", f).endswith("<stdin>\nthe notes\n</stdin>")


def test_dash_reads_the_whole_prompt_from_stdin(pipe: tuple[BinaryIO, int]) -> None:
    reader, write_fd = pipe
    os.write(write_fd, "écris un test\n".encode())
    os.close(write_fd)
    assert job_prompt("-", reader) == "écris un test\n"


def test_an_empty_pipe_or_devnull_leaves_the_prompt_alone(pipe: tuple[BinaryIO, int]) -> None:
    reader, write_fd = pipe
    os.close(write_fd)
    assert job_prompt("just this", reader) == "just this"
    with open(os.devnull, "rb") as null:
        assert job_prompt("just this", null) == "just this"


def test_a_pipe_that_stays_silent_is_left_alone_with_a_note(
    pipe: tuple[BinaryIO, int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_stdin, "FIRST_BYTE_WAIT", 0.05)
    reader, _ = pipe  # the writer stays open and writes nothing
    assert job_prompt("go", reader) == "go"
    assert "stayed silent" in capsys.readouterr().err


def test_a_stream_that_is_not_a_file_is_never_read() -> None:
    assert job_prompt("go", io.BytesIO(b"never")) == "go"


def test_bad_utf8_in_the_argument_names_its_byte() -> None:
    bad = b"fix \xff now".decode("utf-8", "surrogateescape")  # what argv gives Python
    with pytest.raises(UserError, match=r"byte 4"):
        job_prompt(bad, io.BytesIO())


def test_bad_utf8_on_stdin_names_its_byte(pipe: tuple[BinaryIO, int]) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"ok\x80")
    os.close(write_fd)
    with pytest.raises(UserError, match=r"stdin is not valid UTF-8 \(byte 2"):
        job_prompt("-", reader)
