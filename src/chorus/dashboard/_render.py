"""Text that came from a body, made into HTML that is safe to put in the page.

Everything here treats its input as hostile (a model's answer, a file's name, a
diff's lines may all be written by an attacker's prompt):

* :func:`markdown_html` renders markdown with raw HTML off (``<script>`` stays
  text), images off (no request leaves the page) and links kept only when they
  are ``http``/``https`` (a ``javascript:`` link is text);
* :func:`diff_html` colours a unified diff with Pygments' classes (never inline
  styles), every line escaped.

Sans-I/O: strings in, strings out; nothing is read from disk. Markdown-it and
Pygments are loaded on the first page that needs them, not when the daemon starts.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token
    from pygments.formatters import HtmlFormatter
    from pygments.lexer import Lexer

#: A diff bigger than this is cut (the rest is named, not shown).
MAX_DIFF_LINES = 4000
#: An answer longer than this is rendered up to here.
MAX_MARKDOWN_CHARS = 200_000
#: The CSS class the highlighted code lives under.
CODE_CLASS = "hl"

_SAFE_SCHEMES = ("http", "https")


def _link_ok(url: str) -> bool:
    """Only absolute http(s) links survive (no javascript:, data:, file:, relative)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in _SAFE_SCHEMES and bool(parts.netloc)


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable(["image", "html_block", "html_inline"])
    md.validateLink = _link_ok  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.enable("table")
    md.enable("strikethrough")
    return md


def _link_open(self: object, tokens: list[Token], idx: int, options: object, env: object) -> str:
    href = str(tokens[idx].attrs.get("href", ""))
    safe = html.escape(href, quote=True)
    return f'<a href="{safe}" rel="noopener noreferrer nofollow" target="_blank">'


def markdown_html(text: str) -> str:
    """``text`` as HTML: no raw HTML, no images, only http(s) links."""
    return str(_markdown().render(text[:MAX_MARKDOWN_CHARS]))


@dataclass
class DiffFile:
    """One file of a diff: its path (as the diff says it, shown escaped) and lines."""

    path: str
    lines: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0


_HEADER = re.compile(r"^diff --git a/(.*) b/(.*)$")


def split_diff(text: str) -> list[DiffFile]:
    """The files of a unified diff (``git diff`` or ``difflib``), in order."""
    files: list[DiffFile] = []
    for line in text.splitlines()[:MAX_DIFF_LINES]:
        start = _file_start(line)
        if start is not None:
            files.append(DiffFile(start))
            continue
        if not files:
            files.append(DiffFile("(diff)"))
        _add_line(files[-1], line)
    return files


def _file_start(line: str) -> str | None:
    match = _HEADER.match(line)
    return match.group(2) if match else None


def _add_line(file: DiffFile, line: str) -> None:
    if line.startswith("+++ ") and file.path == "(diff)":
        file.path = line[4:].removeprefix("b/")
    if line.startswith("+") and not line.startswith("+++"):
        file.added += 1
    elif line.startswith("-") and not line.startswith("---"):
        file.removed += 1
    file.lines.append(line)


def _lexer(path: str) -> Lexer:
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    name = path.rsplit("/", 1)[-1][:200]
    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


@functools.cache
def _format() -> HtmlFormatter[str]:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, classprefix="")


def _code(line: str, lexer: Lexer) -> str:
    from pygments import highlight

    return str(highlight(line, lexer, _format())).rstrip("\n")


def _line_html(line: str, lexer: Lexer) -> str:
    if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file")):
        return f'<span class="dl meta">{html.escape(line)}</span>'
    if line.startswith("@@"):
        return f'<span class="dl hunk">{html.escape(line)}</span>'
    kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
    sign = f'<span class="sign">{html.escape(line[:1] or " ")}</span>'
    return f'<span class="dl {kind}">{sign}{_code(line[1:], lexer)}</span>'


def file_html(file: DiffFile) -> str:
    """One file's lines, coloured, as the inside of a ``<pre>``."""
    lexer = _lexer(file.path)
    return "".join(_line_html(line, lexer) for line in file.lines)  # each a block


def _by_path(files: list[DiffFile]) -> list[DiffFile]:
    """One entry per path: a file written, then edited, shows its changes together."""
    merged: dict[str, DiffFile] = {}
    for f in files:
        seen = merged.setdefault(f.path, DiffFile(f.path))
        seen.lines += f.lines
        seen.added += f.added
        seen.removed += f.removed
    return list(merged.values())


def diff_html(text: str) -> list[dict[str, object]]:
    """Each file of ``text`` as ``{path, added, removed, html}`` (``html`` is safe)."""
    return [
        {"path": f.path, "added": f.added, "removed": f.removed, "html": file_html(f)}
        for f in _by_path(split_diff(text))
    ]


@functools.cache
def code_css() -> str:
    """The colours of the highlighted code (Pygments' classes under ``.hl``)."""
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="default").get_style_defs(f".{CODE_CLASS}"))
