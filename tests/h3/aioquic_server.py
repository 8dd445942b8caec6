"""A small HTTP/3 server on aioquic, for volley's interop tests.

tests/integration/h3_interop.rs starts it on 127.0.0.1 and runs volley's
HTTP/3 client against it: aioquic is a QUIC and HTTP/3 stack written
independently of quinn (which volley's client and its embedded target use),
in Python, with its own QPACK (pylsqpack).

    python aioquic_server.py --port P --cert cert.pem --key key.pem \
        [--goaway-after K]

Endpoints:
    GET  /hi        a short text body
    GET  /bytes/N   N bytes
    POST /echo      the request's body back, once it has all arrived
    anything else   404

With --goaway-after K, a connection that has taken K requests gets a GOAWAY
(as nginx's keepalive_requests does): requests on streams from the GOAWAY's
id on are refused with H3_REQUEST_REJECTED, unprocessed, and once the
accepted ones are answered the connection is closed with H3_NO_ERROR.

It prints "ready" once it listens. On SIGTERM or SIGINT it prints one JSON
line of counts and exits: requests answered, request body bytes received,
connections whose handshake completed, GOAWAYs sent and streams refused, so
a test can compare them with volley's own figures exactly.
"""

import argparse
import asyncio
import json
import re
import signal
import sys

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, ErrorCode, FrameType, H3Connection, encode_frame
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated

COUNTS = {"requests": 0, "body_bytes": 0, "connections": 0, "goaways": 0, "refused": 0}
BYTES = re.compile(rb"/bytes/(\d{1,9})")
# A response body's largest DATA frame: the stream is flow controlled anyway,
# this only bounds the copies.
CHUNK = 64 * 1024


class Request:
    def __init__(self, method, path):
        self.method = method
        self.path = path
        self.body = bytearray()


class Connection(QuicConnectionProtocol):
    """One QUIC connection and its HTTP/3 requests."""

    goaway_after = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._h3 = None
        self._requests = {}  # stream id -> Request, until answered
        self._taken = 0
        self._limit = None  # the GOAWAY's stream id, once sent

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            self._h3 = H3Connection(self._quic)
        elif isinstance(event, HandshakeCompleted):
            COUNTS["connections"] += 1
        if self._h3 is None:
            return
        for h3_event in self._h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived):
                self._headers(h3_event)
            elif isinstance(h3_event, DataReceived):
                request = self._requests.get(h3_event.stream_id)
                if request is None:
                    continue  # a refused stream's body
                request.body += h3_event.data
                if h3_event.stream_ended:
                    self._answer(h3_event.stream_id)

    def _headers(self, event):
        stream_id = event.stream_id
        if stream_id in self._requests:
            return  # trailers
        if self._limit is not None and stream_id >= self._limit:
            # Beyond the GOAWAY: never processed, so the client may send it
            # again elsewhere (RFC 9114, 5.2).
            self._quic.stop_stream(stream_id, ErrorCode.H3_REQUEST_REJECTED)
            self._quic.reset_stream(stream_id, ErrorCode.H3_REQUEST_REJECTED)
            COUNTS["refused"] += 1
            return
        fields = dict(event.headers)
        self._requests[stream_id] = Request(fields.get(b":method"), fields.get(b":path"))
        self._taken += 1
        if self.goaway_after and self._taken == self.goaway_after:
            self._goaway(stream_id + 4)
        if event.stream_ended:
            self._answer(stream_id)

    def _goaway(self, limit):
        # aioquic's H3Connection has no call for GOAWAY, so the frame goes
        # on its control stream directly.
        self._limit = limit
        frame = encode_frame(FrameType.GOAWAY, encode_uint_var(limit))
        self._quic.send_stream_data(self._h3._local_control_stream_id, frame)
        COUNTS["goaways"] += 1

    def _answer(self, stream_id):
        request = self._requests.pop(stream_id)
        COUNTS["body_bytes"] += len(request.body)
        sized = BYTES.fullmatch(request.path or b"")
        if request.method == b"GET" and request.path == b"/hi":
            status, body = 200, b"hi from aioquic\n"
        elif request.method == b"GET" and sized:
            status, body = 200, b"x" * int(sized.group(1))
        elif request.method == b"POST" and request.path == b"/echo":
            status, body = 200, bytes(request.body)
        else:
            status, body = 404, b"not found\n"
        self._h3.send_headers(
            stream_id,
            [
                (b":status", str(status).encode()),
                (b"content-type", b"application/octet-stream"),
                (b"content-length", str(len(body)).encode()),
            ],
        )
        for at in range(0, len(body), CHUNK):
            self._h3.send_data(stream_id, body[at : at + CHUNK], end_stream=False)
        self._h3.send_data(stream_id, b"", end_stream=True)
        COUNTS["requests"] += 1
        self.transmit()
        if self._limit is not None and not self._requests:
            # All that was taken is answered: close as a server draining
            # would, a moment later so the last responses are delivered
            # (a close drops what is still unacknowledged).
            asyncio.get_running_loop().call_later(0.5, self.close_quietly)

    def close_quietly(self):
        self._quic.close(error_code=ErrorCode.H3_NO_ERROR)
        self.transmit()


def arguments(parser):
    """The arguments every server script here takes, parsed."""
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    return parser.parse_args()


def configuration(args):
    """A server configuration with the test's certificate."""
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(args.cert, args.key)
    return config


async def serve_until_stopped(port, config, protocol):
    """Serves on 127.0.0.1:port until SIGTERM or SIGINT, then prints COUNTS."""
    server = await serve("127.0.0.1", port, configuration=config, create_protocol=protocol)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    server.close()
    print(json.dumps(COUNTS), flush=True)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goaway-after", type=int, default=0)
    args = arguments(parser)
    config = configuration(args)
    # Room for a few megabyte uploads at once without waiting on credit.
    config.max_data = 16 * 1024 * 1024
    config.max_stream_data = 2 * 1024 * 1024
    Connection.goaway_after = args.goaway_after
    await serve_until_stopped(args.port, config, Connection)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
