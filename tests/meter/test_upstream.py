"""The meter's own upstream client (``chorus.meter._upstream``), through the meter:
connections kept alive and reused, one the upstream closed while idle replaced (not
a 502), an answer that ends with its connection passed whole, TLS to an https
upstream checked against the certificates ``SSL_CERT_FILE`` names."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chorus.bodies import channel_key
from chorus.mcpserver import channel_running
from chorus.meter import MeterApp, NullSink, meter_url
from chorus.meter._upstream import Upstream, origin_of, request_head

_EVENT = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
_KEPT = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (
    len(_EVENT),
    _EVENT,
)
_UNTIL_CLOSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


@dataclass
class Upstreamish:
    """A raw upstream: ``answer`` writes each answer; returns whether to keep going."""

    url: str
    meter: MeterApp
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


Answer = Callable[[asyncio.StreamWriter], Awaitable[bool]]


@asynccontextmanager
async def upstream(
    meter: MeterApp, answer: Answer, tls: ssl.SSLContext | None = None
) -> AsyncIterator[Upstreamish]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                body = await reader.readexactly(int(length.group(1)) if length else 0)
                state.requests.append(head + body)
                if not await answer(writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        await writer.wait_closed()
        state.closed.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    state = Upstreamish(f"{'https' if tls else 'http'}://localhost:{port}", meter)
    async with server:
        yield state
        await meter.close()  # its kept connections: the upstream's ends see them go
        await asyncio.wait_for(state.closed.wait(), 30)


async def kept(writer: asyncio.StreamWriter) -> bool:
    writer.write(_KEPT)
    await writer.drain()
    return True


async def through(meter: MeterApp, url: str, count: int = 1) -> list[httpx.Response]:
    async with channel_running(None, None, {"meter": meter}) as channel:
        base = meter_url(channel, "s1", "anthropic", url)
        async with httpx.AsyncClient(timeout=60) as client:
            return [
                await client.post(base + "/v1/messages", json={"stream": True})
                for _ in range(count)
            ]


@pytest.fixture
async def meter(chorus_home: Path) -> AsyncIterator[MeterApp]:
    app = MeterApp(channel_key(), NullSink())
    yield app
    await app.close()


async def test_connections_to_an_upstream_are_kept_alive_and_reused(meter: MeterApp) -> None:
    async with upstream(meter, kept) as up:
        answers = await through(meter, up.url, count=3)
    assert [a.content for a in answers] == [_EVENT] * 3
    assert len(up.requests) == 3
    assert up.connections == 1


async def test_a_kept_connection_the_upstream_closed_is_replaced_not_a_502(
    meter: MeterApp,
) -> None:
    async def once(writer: asyncio.StreamWriter) -> bool:
        await kept(writer)
        return False  # says nothing of closing (keep-alive), then closes while idle

    async with upstream(meter, once) as up:
        [first] = await through(meter, up.url)
        await asyncio.wait_for(up.closed.wait(), 30)  # its end reached the meter's socket
        up.closed.clear()
        [second] = await through(meter, up.url)
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.content == _EVENT
    assert up.connections == 2


async def test_an_answer_that_ends_with_its_connection_passes_whole(meter: MeterApp) -> None:
    async def until_close(writer: asyncio.StreamWriter) -> bool:
        writer.write(_UNTIL_CLOSE + _EVENT)
        await writer.drain()
        writer.write(_EVENT)
        return False

    async with upstream(meter, until_close) as up:
        [answer] = await through(meter, up.url)
    assert answer.status_code == 200
    assert answer.content == _EVENT * 2


def test_a_request_goes_under_the_upstreams_base_path_with_its_own_host() -> None:
    origin = origin_of("https://api.example.com:8443/v1/")
    head = request_head(b"POST", origin, b"/responses?x=1", [(b"authorization", b"k")], 2)
    assert head == (
        b"POST /v1/responses?x=1 HTTP/1.1\r\nhost: api.example.com:8443\r\n"
        b"authorization: k\r\ncontent-length: 2\r\n\r\n"
    )
    assert request_head(b"GET", origin_of("http://h"), b"", [], 0) == (
        b"GET / HTTP/1.1\r\nhost: h\r\n\r\n"
    )
    with pytest.raises(ValueError, match="not an http"):
        origin_of("file:///etc/passwd")


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_an_https_upstream_is_reached_over_tls_and_its_certificate_checked(
    meter: MeterApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _certificate(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with upstream(meter, kept, tls) as up:
        [untrusted] = await through(meter, up.url)  # certifi's bundle: not this one
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        await meter.close()
        meter.client = Upstream()  # a new pool reads the certificates again
        [trusted] = await through(meter, up.url)
    assert untrusted.status_code == 502
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.json()["error"]["message"]
    assert trusted.status_code == 200
    assert trusted.content == _EVENT
    assert len(up.requests) == 1  # the untrusted one never left


async def test_a_client_that_goes_away_before_any_answer_closes_the_upstream_request(
    meter: MeterApp,
) -> None:
    """While the model still thinks (no answer's head yet) a client that hangs up
    closes the meter's request upstream, not only once the answer began."""
    hung_up = asyncio.Event()

    async def thinking(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # nothing is answered; the meter's end is awaited
        hung_up.set()
        writer.close()

    server = await asyncio.start_server(thinking, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, channel_running(None, None, {"meter": meter}) as channel:
        base = meter_url(channel, "s1", "anthropic", url)
        async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=0.5)) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.post(base + "/v1/messages", json={"stream": True})
        await asyncio.wait_for(hung_up.wait(), 30)
