"""``chorus init``'s one edit to config.toml: ``[router] bodies``, the rest of the
text kept byte for byte."""

from __future__ import annotations

import tomllib

import pytest

from chorus import ConfigError
from chorus.cli._init_edit import MARKER, with_bodies

PERSON = """# my settings
[daemon]
notifications = false  # quiet, please

[agents.claude.env]
ANTHROPIC_BASE_URL = "http://127.0.0.1:9"
"""


def test_an_empty_file_gets_a_router_table() -> None:
    edit = with_bodies("", ["claude"])
    assert edit.text == f'[router]\n{MARKER}\nbodies = ["claude"]\n'
    assert (edit.bodies, edit.managed) == (["claude"], True)


def test_everything_else_is_kept_byte_for_byte() -> None:
    edit = with_bodies(PERSON, ["claude", "gemini"])
    assert edit.text.startswith(PERSON)
    assert edit.text[len(PERSON) :] == f'\n[router]\n{MARKER}\nbodies = ["claude", "gemini"]\n'
    assert with_bodies(edit.text, ["claude", "gemini"]).text == edit.text  # again: the same


def test_a_file_without_a_last_newline_or_with_crlf() -> None:
    assert with_bodies("[daemon]\nnotifications = false", ["codex"]).text == (
        f'[daemon]\nnotifications = false\n\n[router]\n{MARKER}\nbodies = ["codex"]\n'
    )
    crlf = "[daemon]\r\nnotifications = false\r\n"
    assert with_bodies(crlf, ["codex"]).text == (
        f'{crlf}\r\n[router]\r\n{MARKER}\r\nbodies = ["codex"]\r\n'
    )


def test_an_existing_router_table_gets_the_key_under_its_header() -> None:
    text = '[router]\nstrategy = "round_robin"\n\n[retry]\nmax_retries = 1\n'
    edit = with_bodies(text, ["claude"])
    assert edit.text == (
        f'[router]\n{MARKER}\nbodies = ["claude"]\nstrategy = "round_robin"\n\n'
        "[retry]\nmax_retries = 1\n"
    )
    assert edit.text.count("[router]") == 1


def test_inits_own_list_grows_and_never_shrinks() -> None:
    first = with_bodies(PERSON, ["claude"]).text
    grown = with_bodies(first, ["gemini", "claude"])
    assert grown.text == first.replace('["claude"]', '["claude", "gemini"]')
    lost = with_bodies(grown.text, [])  # a login gone from this shell: nothing taken out
    assert lost.text == grown.text
    assert lost.bodies == ["claude", "gemini"]


def test_a_persons_own_list_is_left_as_it_is() -> None:
    text = '[router]\nbodies = ["codex"]  # only codex, thanks\n'
    edit = with_bodies(text, ["claude", "codex"])
    assert edit.text == text
    assert (edit.bodies, edit.managed) == (["codex"], False)
    without_marker = with_bodies(PERSON, ["claude"]).text.replace(MARKER + "\n", "")
    assert with_bodies(without_marker, ["claude", "gemini"]).text == without_marker


def test_nothing_ready_writes_nothing() -> None:
    edit = with_bodies(PERSON, [])
    assert edit.text == PERSON
    assert edit.bodies is None


def test_a_layout_the_edit_cannot_follow_is_refused() -> None:
    dotted = 'router.strategy = "round_robin"\n'
    with pytest.raises(ConfigError, match=r'bodies = \["claude"\]'):
        with_bodies(dotted, ["claude"])
    inline = 'router = { strategy = "round_robin" }\n'
    with pytest.raises(ConfigError, match="cannot add to"):
        with_bodies(inline, ["claude"])


def test_a_multi_line_string_that_looks_like_a_header_is_not_one() -> None:
    text = 'note = """\n[router]\n"""\n'
    edit = with_bodies(text, ["claude"])
    assert tomllib.loads(edit.text) == {"note": "[router]\n", "router": {"bodies": ["claude"]}}


def test_not_toml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        with_bodies("[router\n", ["claude"])
