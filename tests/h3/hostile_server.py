"""Hostile HTTP/3 servers on aioquic, for volley's tests of its bounds.

tests/integration/h3_hostile.rs starts it on 127.0.0.1 in one --mode and
checks that volley's run against it ends in time, in bounded memory, with
its requests counted or failed by a named kind:

    python hostile_server.py --mode MODE --port P --cert cert.pem --key key.pem

Modes:
    handshake     answers the client's Initial (its ServerHello) but never
                  sends a Handshake packet, so the handshake never finishes
    ping-flood    serves as aioquic_server.py does while sending packets
                  of hundreds of PING frames each as fast as it can
    cid-churn     serves, while sending NEW_CONNECTION_ID frames by the
                  thousand, each retiring all earlier ones (legal, but each
                  asks the client to retire one)
    cid-overflow  sends thousands of NEW_CONNECTION_ID frames that retire
                  nothing, past the client's active_connection_id_limit
    big-headers   answers each request with a 1 MiB HEADERS frame
    qpack-bomb    answers each request with a 200 kB HEADERS frame of
                  one-byte static table references: 200,000 fields, about
                  15 MB once decoded
    zero-window   gives the client no flow-control credit at all (initial
                  max_data and max_stream_data of 0), so no request arrives

Connection handling, the endpoints and the counts printed on SIGTERM are
aioquic_server.py's; "pings" and "cids" count what was sent here, and
"initials" the Initial packets of the handshake mode.
"""

import argparse
import asyncio
import os

from aioquic.buffer import Buffer
from aioquic.h3.connection import FrameType, encode_frame
from aioquic.quic.connection import QuicConnection, QuicConnectionId
from aioquic.quic.events import ConnectionIdIssued, ConnectionTerminated, HandshakeCompleted
from aioquic.quic.packet import QuicFrameType
from aioquic.quic.packet_builder import QuicPacketBuilderStop

import aioquic_server
from aioquic_server import COUNTS, arguments, configuration, serve_until_stopped

COUNTS.update({"pings": 0, "cids": 0, "initials": 0})
MODES = [
    "handshake",
    "ping-flood",
    "cid-churn",
    "cid-overflow",
    "big-headers",
    "qpack-bomb",
    "zero-window",
]
# PING frames in a packet: half of it, the rest left for the responses
# (the flood must not starve the server's own answers).
PINGS_A_PACKET = 600
# NEW_CONNECTION_ID frames per connection.
CIDS = 5000


def qpack_integer(first, prefix_bits, value):
    """A QPACK (HPACK) integer with `first`'s high bits before its prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


# A field section's prefix (no dynamic table) and ":status: 200", static
# entry 25 as an indexed field line.
SECTION_START = b"\x00\x00" + qpack_integer(0xC0, 6, 25)


def big_headers():
    """A HEADERS frame of one 1 MiB field (a literal name and value)."""
    block = SECTION_START + qpack_integer(0x20, 3, 5) + b"x-big"
    value = b"v" * (1 << 20)
    block += qpack_integer(0x00, 7, len(value)) + value
    return encode_frame(FrameType.HEADERS, block)


def qpack_bomb():
    """A HEADERS frame under volley's 256 KiB frame limit whose fields,
    decoded, are far past the 256 KiB volley advertises: static entry 52
    ("content-type: text/html; charset=utf-8", 70 bytes as RFC 9114
    counts a field), named by one byte 200,000 times."""
    block = SECTION_START + qpack_integer(0xC0, 6, 52) * 200_000
    return encode_frame(FrameType.HEADERS, block)


# --- packet-level behaviour, patched into aioquic's QuicConnection ---------

original_write_ping = QuicConnection._write_ping_frame


def write_many_pings(self, builder, uids=[], comment=""):
    """A requested PING is PINGS_A_PACKET PING frames (fewer where the
    packet has no room)."""
    if not uids:
        return original_write_ping(self, builder, uids, comment)
    written = 0
    try:
        while written < PINGS_A_PACKET:
            builder.start_frame(QuicFrameType.PING)
            written += 1
    except QuicPacketBuilderStop:
        if not written:
            raise
    COUNTS["pings"] += written


def write_cid(self, builder, connection_id):
    """NEW_CONNECTION_ID, as aioquic writes it but for Retire Prior To: in
    cid-churn its own sequence number, so that every earlier connection ID
    is to be retired (aioquic always writes 0), counted."""
    retire_prior_to = connection_id.sequence_number if self.hostile_mode == "cid-churn" else 0
    buf = builder.start_frame(
        QuicFrameType.NEW_CONNECTION_ID,
        capacity=64,
        handler=self._on_new_connection_id_delivery,
        handler_args=(connection_id,),
    )
    buf.push_uint_var(connection_id.sequence_number)
    buf.push_uint_var(retire_prior_to)
    buf.push_uint8(len(connection_id.cid))
    buf.push_bytes(connection_id.cid)
    buf.push_bytes(connection_id.stateless_reset_token)
    connection_id.was_sent = True
    # The server routes the client's packets by the connection IDs issued.
    self._events.append(ConnectionIdIssued(connection_id=connection_id.cid))
    COUNTS["cids"] += 1


def initial_packets_only(datagram):
    """The Initial packets of a datagram of coalesced long-header packets
    (RFC 9000 17.2): what is left once its Handshake packets are cut."""
    kept = b""
    buf = Buffer(data=datagram)
    while not buf.eof():
        start = buf.tell()
        first = buf.pull_uint8()
        if not first & 0x80:
            break  # a short header: 1-RTT, never sent before the handshake
        buf.pull_bytes(4)  # version
        buf.pull_bytes(buf.pull_uint8())  # destination connection ID
        buf.pull_bytes(buf.pull_uint8())  # source connection ID
        initial = (first & 0x30) >> 4 == 0
        if initial:
            buf.pull_bytes(buf.pull_uint_var())  # token
        length = buf.pull_uint_var()
        end = buf.tell() + length
        if initial:
            kept += datagram[start:end]
            COUNTS["initials"] += 1
        buf.seek(end)
    return kept


class InitialsOnly:
    """A datagram transport that sends only Initial packets."""

    def __init__(self, transport):
        self._transport = transport

    def sendto(self, data, addr):
        kept = initial_packets_only(data)
        if kept:
            self._transport.sendto(kept, addr)


class Hostile(aioquic_server.Connection):
    mode = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ended = False

    def connection_made(self, transport):
        if self.mode == "handshake":
            transport = InitialsOnly(transport)
        super().connection_made(transport)

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self._ended = True
        elif isinstance(event, HandshakeCompleted):
            if self.mode == "ping-flood":
                asyncio.ensure_future(self._ping_flood())
            elif self.mode in ("cid-churn", "cid-overflow"):
                self._issue_cids()
        super().quic_event_received(event)

    async def _ping_flood(self):
        # A packet of PINGs each turn of the event loop, so the server's
        # own work (ACKs, responses) goes on between them.
        while not self._ended:
            self._quic.send_ping(0)
            self.transmit()
            await asyncio.sleep(0)

    def _issue_cids(self):
        quic = self._quic
        for _ in range(CIDS):
            quic._host_cids.append(
                QuicConnectionId(
                    cid=os.urandom(quic._configuration.connection_id_length),
                    sequence_number=quic._host_cid_seq,
                    stateless_reset_token=os.urandom(16),
                )
            )
            quic._host_cid_seq += 1
        self.transmit()

    def _answer(self, stream_id):
        if self.mode not in ("big-headers", "qpack-bomb"):
            return super()._answer(stream_id)
        self._requests.pop(stream_id)
        frame = big_headers() if self.mode == "big-headers" else qpack_bomb()
        self._quic.send_stream_data(stream_id, frame, end_stream=True)
        COUNTS["requests"] += 1
        self.transmit()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    args = arguments(parser)
    config = configuration(args)
    Hostile.mode = args.mode
    if args.mode == "ping-flood":
        QuicConnection._write_ping_frame = write_many_pings
    elif args.mode in ("cid-churn", "cid-overflow"):
        QuicConnection.hostile_mode = args.mode
        QuicConnection._write_new_connection_id_frame = write_cid
    elif args.mode == "zero-window":
        config.max_data = 0
        config.max_stream_data = 0
    await serve_until_stopped(args.port, config, Hostile)


if __name__ == "__main__":
    asyncio.run(main())
