"""A request's JSON, encoded before ``json`` loads: the bytes ``json.dumps`` writes;
and its path, quoted only when it must be."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chorus.client._client import _job_path, _path
from chorus.client._wire import dumps

VALUES = [
    {"prompt": 'héllo "x"\n\t\x00 ☃ 𝄞', "body": None, "a": True, "b": False},
    {"planners": ["claude", "codex"], "rounds": 2, "f": 1.5, "big": 10**30, "nan": float("nan")},
    [],
    "plain",
    {"nested": {"deep": [{"x": None}]}},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_bytes_are_json_dumps_own(value: object) -> None:
    assert dumps(value) == json.dumps(value)


def test_what_json_cannot_encode_is_a_type_error_as_json_says() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)


def test_encoding_loads_neither_json_nor_re() -> None:
    code = (
        "import sys\nfrom chorus.client._wire import dumps\n"
        "assert dumps({'a': ['b', 1]}) == '{\"a\": [\"b\", 1]}'\n"
        "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


def test_paths_are_quoted_only_when_they_must_be() -> None:
    assert _job_path("ab12-CD_3.x~", "/events") == "/jobs/ab12-CD_3.x~/events"
    assert _job_path("a/../b c?") == "/jobs/a%2F..%2Fb%20c%3F"
    assert _path("/jobs", {"state": "running", "q": "a&b=c"}) == "/jobs?state=running&q=a%26b%3Dc"
    assert _path("/jobs", None) == "/jobs"
