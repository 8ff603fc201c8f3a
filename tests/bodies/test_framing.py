"""NDJSON framing: newline only, partial lines kept, size cap enforced."""

from __future__ import annotations

from chorus.bodies import LineFramer


def test_partial_lines_are_kept_across_feeds() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":') == []
    assert framer.feed(b'1}\n{"b"') == ['{"a":1}']
    assert framer.feed(b":2}\n") == ['{"b":2}']
    assert framer.flush() is None


def test_unicode_line_separators_do_not_split() -> None:
    line = '{"t":"a\u2028b\u2029c\x85d"}'
    assert LineFramer().feed(line.encode() + b"\n") == [line]


def test_multibyte_char_split_across_chunks() -> None:
    data = '{"t":"é"}\n'.encode()
    framer = LineFramer()
    assert framer.feed(data[:7]) == []
    assert framer.feed(data[7:]) == ['{"t":"é"}']


def test_line_over_cap_is_dropped_and_neighbours_kept() -> None:
    framer = LineFramer(max_bytes=10)
    assert framer.feed(b"before\n" + b"x" * 11 + b"\nafter\n") == ["before", "after"]
    assert framer.dropped == 1


def test_unterminated_overflow_is_skipped_up_to_next_newline() -> None:
    framer = LineFramer(max_bytes=10)
    assert framer.feed(b"y" * 20) == []
    assert framer.feed(b"y" * 20) == []
    assert framer.feed(b"yyyy\nnext\n") == ["next"]
    assert framer.dropped == 1


def test_flush_returns_unterminated_tail() -> None:
    framer = LineFramer()
    framer.feed(b"a\nlast")
    assert framer.flush() == "last"
