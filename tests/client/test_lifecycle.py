"""What ``chorus start`` reads from a daemon's ready line."""

from __future__ import annotations

from chorus.client._lifecycle import FACTS, READY, _facts


def test_the_facts_line_before_ready_is_read() -> None:
    said = b"a warning on stderr\n" + FACTS + b'{"tcp": null, "tcp_error": "port taken"}\n' + READY
    assert _facts(said) == {"tcp": None, "tcp_error": "port taken"}


def test_a_daemon_that_said_no_facts_or_garbled_ones_gives_none() -> None:
    assert _facts(READY) is None
    assert _facts(FACTS + b"{not json\n" + READY) is None
    assert _facts(FACTS + b"[1, 2]\n" + READY) is None
