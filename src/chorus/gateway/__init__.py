"""The UCP v1 gateway: remote brains drive long-lived bodies over WebSocket.

Inbound, brains connect to ``/ucp`` on the daemon's unix socket or on the
token-protected TCP listener (``127.0.0.1:7719`` by default); outbound,
Chorus dials a brain (``chorus connect --brain-url wss://...``) and serves the
same protocol on that link. :class:`UcpClient` is a small brain-side client.
"""

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
from chorus.gateway._limits import PendingRequests, TokenBucket
from chorus.gateway._listen import address_path
from chorus.gateway._metrics import CONTENT_TYPE, GatewayMetrics
from chorus.gateway._outbound import INSECURE_ENV, backoff_delay, check_brain_url
from chorus.gateway._policy import ControlContext, ControlPolicy, allow_all_controls
from chorus.gateway._sessions import CAPABILITY_OF, GatewaySession, SessionHub

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
    "known_request",
    "load_gateway_settings",
    "settings_from_tables",
    "token_path",
]
