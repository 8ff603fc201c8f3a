"""The model-API meter: every body's model calls pass through Chorus, which reads the
usage and quota the providers state and holds the budgets.

- :class:`MeterApp`: the streaming pass-through proxy (Anthropic Messages, OpenAI
  Responses, Gemini) (``_proxy``), served by the meter's own process.
- :class:`MeterHost`: the daemon's hold on the meter's own process (``_process``,
  ``python -m chorus.meter``), which outlives the daemon; records go through a spool.
- :func:`point_body`: how a body's CLI is pointed at its session's meter URL, with
  its configured upstream signed into the URL (``_point``).
- :class:`UsageReader`, :func:`read_usage`: the APIs' usage fields, sans-I/O (``_usage``).
- :func:`price_table`: USD per million tokens per model (``prices.toml``, overridable).
- :class:`SecretBook`, :class:`Restorer`: secrets hidden from the providers and put
  back in the model's tool calls (``_secrets``, sans-I/O).
- :func:`windows_from`, :class:`QuotaBook`: rate-limit headers and quota errors (``_quota``).
"""

from chorus.meter._host import MeterHost, end_meter_left
from chorus.meter._point import (
    API_OF_CLI,
    DEFAULT_UPSTREAM,
    ROUTE,
    Pointed,
    Target,
    close_meter,
    codex_provider,
    meter_url,
    open_meter,
    point_body,
    resolve,
)
from chorus.meter._prices import PRICES_FILE, Price, PriceTable, price_table
from chorus.meter._proxy import MAX_REQUEST_BYTES, MeterApp, MeterSink, NullSink, new_client
from chorus.meter._quota import QuotaBook, Window, windows_from
from chorus.meter._replies import Reply, api_error, budget_reply, unreachable_reply
from chorus.meter._secrets import PLACEHOLDER, ArgStream, Restorer, SecretBook, placeholder, restore
from chorus.meter._sse import SseEvent, SseSplitter
from chorus.meter._usage import APIS, Api, Tally, UsageReader, read_usage

__all__ = [
    "APIS",
    "API_OF_CLI",
    "DEFAULT_UPSTREAM",
    "MAX_REQUEST_BYTES",
    "PLACEHOLDER",
    "PRICES_FILE",
    "ROUTE",
    "Api",
    "ArgStream",
    "MeterApp",
    "MeterHost",
    "MeterSink",
    "NullSink",
    "Pointed",
    "Price",
    "PriceTable",
    "QuotaBook",
    "Reply",
    "Restorer",
    "SecretBook",
    "SseEvent",
    "SseSplitter",
    "Tally",
    "Target",
    "UsageReader",
    "Window",
    "api_error",
    "budget_reply",
    "close_meter",
    "codex_provider",
    "end_meter_left",
    "meter_url",
    "new_client",
    "open_meter",
    "placeholder",
    "point_body",
    "price_table",
    "read_usage",
    "resolve",
    "restore",
    "unreachable_reply",
    "windows_from",
]
