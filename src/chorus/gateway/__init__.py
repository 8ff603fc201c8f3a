"""The UCP v1 gateway: remote brains drive long-lived bodies over WebSocket.

Where it listens (both started by the daemon, ``chorus start``):

* ``ws+unix://CHORUS_HOME/run/chorus.sock`` path ``/ucp``: no token (the
  socket's 0600 mode is the authentication), plus ``/metrics``,
  ``/gateway/status`` and ``/gateway/brain`` (dial / hang up a brain);
* ``ws://127.0.0.1:7719/ucp`` (``[gateway] host``/``port``; ``port = 0`` picks
  one, written to ``run/gateway.json``): every request needs
  ``Authorization: Bearer <token>`` (``[gateway] token``, else
  ``run/gateway.token``, created 0600; ``chorus gateway token`` prints it),
  plus ``/metrics`` (token too, unless ``metrics_require_token = false``).

Outbound, Chorus dials a brain (``chorus connect --brain-url wss://...`` or
``[brain] url``) and serves the same protocol on that link (see
:mod:`chorus.gateway._outbound` for the URL rules and the redial policy).

The protocol: a brain sends ``initialize {body, model, cwd, permission_mode,
resume, last_seq}``, then ``user`` messages and control requests
(``set_model``, ``set_permission_mode``, ``set_max_thinking_tokens``,
``interrupt``, ``mcp_status``, ``steer``, ``status``); every request gets
exactly one response within its deadline, an error carrying a stable
:class:`GatewayCode`; events stream as ``{"type": "event", "seq", "event"}``
frames. The per-frame contract is in :mod:`chorus.gateway._connection`.

:class:`Gateway` is what the daemon mounts; :class:`UcpClient` is a small
brain-side client (``chorus repl`` and the tests use it).
"""

from chorus.gateway._accept import ConnectionCaps, guarded_protocol
from chorus.gateway._channel import Channel, ChannelClosed
from chorus.gateway._client import UcpClient
from chorus.gateway._config import (
    DEFAULT_PORT,
    BrainConfig,
    GatewayConfig,
    GatewaySettings,
    gateway_token,
    load_gateway_settings,
    settings_from_tables,
    token_path,
)
from chorus.gateway._errors import (
    BrainLinkError,
    BrainUrlError,
    GatewayCode,
    GatewayError,
    GatewayTokenError,
    RequestError,
    ResponseError,
)
from chorus.gateway._frames import MAX_DEPTH, Decoded, Rejected, decode_frame, known_request
from chorus.gateway._gateway import Gateway
from chorus.gateway._guard import PolicyGuards, origin_of, policy_guards
from chorus.gateway._limits import PendingRequests, TokenBucket
from chorus.gateway._listen import address_path
from chorus.gateway._metrics import CONTENT_TYPE, GatewayMetrics
from chorus.gateway._outbound import INSECURE_ENV, backoff_delay, check_brain_url
from chorus.gateway._policy import ControlContext, ControlPolicy, allow_all_controls
from chorus.session import CAPABILITY_OF, SessionHub
from chorus.session import Session as GatewaySession

__all__ = [
    "CAPABILITY_OF",
    "CONTENT_TYPE",
    "DEFAULT_PORT",
    "INSECURE_ENV",
    "MAX_DEPTH",
    "BrainConfig",
    "BrainLinkError",
    "BrainUrlError",
    "Channel",
    "ChannelClosed",
    "ConnectionCaps",
    "ControlContext",
    "ControlPolicy",
    "Decoded",
    "Gateway",
    "GatewayCode",
    "GatewayConfig",
    "GatewayError",
    "GatewayMetrics",
    "GatewaySession",
    "GatewaySettings",
    "GatewayTokenError",
    "PendingRequests",
    "PolicyGuards",
    "Rejected",
    "RequestError",
    "ResponseError",
    "SessionHub",
    "TokenBucket",
    "UcpClient",
    "address_path",
    "allow_all_controls",
    "backoff_delay",
    "check_brain_url",
    "decode_frame",
    "gateway_token",
    "guarded_protocol",
    "known_request",
    "load_gateway_settings",
    "origin_of",
    "policy_guards",
    "settings_from_tables",
    "token_path",
]
