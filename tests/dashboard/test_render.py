"""What the dashboard puts in a page from a body's text: markdown with nothing
active in it, diffs coloured with every line escaped, a job's diff from its events."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from chorus.dashboard._changes import diff_from_events
from chorus.dashboard._render import MAX_DIFF_LINES, diff_html, markdown_html, split_diff
from chorus.events import FileChange, ToolCall, ToolResult

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[a](javascript:alert(1))",
    "[a](JaVaScRiPt:alert(1))",
    "[a](data:text/html,<script>alert(1)</script>)",
    "[a](vbscript:msgbox)",
    "[a](/relative/path)",
    "[a](file:///etc/passwd)",
    '<a href="javascript:alert(1)">x</a>',
    "![p](https://tracker.example/pixel.png)",
    "<iframe src=https://evil.example></iframe>",
    '<svg onload="alert(1)">',
    "[a](java\tscript:alert(1))",
    "[a](<javascript:alert(1)>)",
]


class _Tags(HTMLParser):
    """Every tag and attribute the browser would see."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


SAFE_TAGS = {"h1", "p", "strong", "em", "code", "pre", "a", "ul", "ol", "li", "blockquote"}


@pytest.mark.parametrize("attack", ATTACKS)
def test_markdown_keeps_no_active_content(attack: str) -> None:
    out = markdown_html(f"# Title\n\nsome **bold** {attack}")
    assert "<strong>bold</strong>" in out
    for tag, attrs in _tags(out):
        assert tag in SAFE_TAGS, (tag, out)
        assert not any(name.startswith("on") or name == "style" for name in attrs), out
        if tag == "a":
            assert str(attrs["href"]).startswith(("http://", "https://")), out


def test_markdown_keeps_http_links_with_a_safe_rel() -> None:
    out = markdown_html('see [the docs](https://example.org/a?b="c"&d)')
    assert 'href="https://example.org/a?b=%22c%22&amp;d"' in out
    assert 'rel="noopener noreferrer nofollow"' in out


def test_a_diff_is_split_per_file_coloured_and_escaped() -> None:
    diff = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n"
        "-def old(): pass\n+def new(): return '<script>'\n"
        "diff --git a/<img src=x onerror=alert(1)>.md b/<img src=x onerror=alert(1)>.md\n"
        "+++ b/<img src=x onerror=alert(1)>.md\n+</textarea><script>alert(1)</script>\n"
    )
    files = diff_html(diff)
    assert [(f["path"], f["added"], f["removed"]) for f in files] == [
        ("x.py", 1, 1),
        ("<img src=x onerror=alert(1)>.md", 1, 0),
    ]
    py, md = (str(f["html"]) for f in files)
    assert '<span class="k">def</span>' in py  # coloured by class, not inline style
    assert "&lt;script&gt;" in py or "&#39;&lt;script&gt;&#39;" in py
    assert {tag for tag, _ in _tags(py + md)} == {"span"}  # only the colours' spans
    assert all(set(attrs) == {"class"} for _, attrs in _tags(py + md))


def test_a_huge_diff_is_cut() -> None:
    big = "diff --git a/b b/b\n" + "+x\n" * (MAX_DIFF_LINES * 2)
    assert sum(len(f.lines) for f in split_diff(big)) < MAX_DIFF_LINES


def _call(call_id: str, tool: str, **data: object) -> ToolCall:
    return ToolCall(call_id=call_id, tool=tool, native_tool=tool.title(), input=data)


def test_a_jobs_diff_comes_from_its_writes_and_edits_but_not_failed_ones() -> None:
    events = [
        _call("1", "write", file_path="/w/a.txt", content="one\ntwo\n"),
        ToolResult(call_id="1", output="ok"),
        _call("2", "edit", file_path="/w/a.txt", old_string="two", new_string="three"),
        ToolResult(call_id="2", output="ok"),
        _call("3", "edit", file_path="/w/denied.txt", old_string="a", new_string="b"),
        ToolResult(call_id="3", output="denied", is_error=True, status="denied"),
        _call("4", "shell", command="rm -rf /"),
        _call(
            "5",
            "edit",
            file_path="/etc/../../w/m.txt",
            edits=[{"old_string": "x", "new_string": "y"}, {"old_string": "p", "new_string": "q"}],
        ),
        FileChange(path="/w/c.rs", kind="update", diff="@@ -1 +1 @@\n-a\n+b"),
    ]
    files = split_diff(diff_from_events(events, "/w"))
    assert [f.path for f in files] == [
        "a.txt",
        "a.txt",
        "/etc/../../w/m.txt",
        "/etc/../../w/m.txt",
        "c.rs",
    ]
    assert [f.added for f in files] == [2, 1, 1, 1, 1]
    assert "+three" in files[1].lines
