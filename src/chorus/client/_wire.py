"""JSON for the request on its way out, without loading ``json`` first.

``import json`` loads ``re`` and compiles its patterns (some 4 ms of a command's
start), all before the request could be sent. A request body is encoded here by
the stdlib's own C encoder, the one ``json.dumps`` calls with its default
arguments, so the bytes are those ``json.dumps`` writes; ``json`` itself loads
after the request is on the socket, while the daemon works on it, to read the
answer. Where the C encoder is missing, ``json.dumps`` does it all.
"""

from __future__ import annotations

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

try:
    from _json import encode_basestring_ascii, make_encoder
except ImportError:  # pragma: no cover - CPython has it; other interpreters may not
    make_encoder = None  # type: ignore[assignment,misc]


def dumps(value: Any) -> str:
    """``json.dumps(value)``, byte for byte."""
    if make_encoder is not None:
        try:
            return _c_dumps(value)
        except TypeError:  # a value JSON has no form for, or another C encoder's signature
            pass
    import json

    return json.dumps(value)


def _c_dumps(value: Any) -> str:
    # json.dumps's defaults: circular check, no indent, ": " and ", ", unsorted, NaN allowed
    encode = make_encoder({}, _unknown, encode_basestring_ascii, None, ": ", ", ", *_FLAGS)
    return "".join(encode(value, 0))


#: sort_keys, skipkeys, allow_nan as ``json.dumps`` has them by default.
_FLAGS = (False, False, True)


def _unknown(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
