"""Delay every packet handed to an NFQUEUE by a fixed time (plus jitter), then let it go.

Self-contained (standard library only), shipped to the node and started inside the target pod's
network namespace (``nsenter -t PID -n``) by ``network_latency`` where netem is missing. It speaks
nfnetlink_queue directly: bind a queue, receive packet ids (metadata only, no payload copy), and
send an ACCEPT verdict for each one when its time is due. The iptables rule that feeds the queue
uses ``--queue-bypass``, so if this process ends, packets flow again undelayed.

Usage: ``python3 delayq.py QUEUE_NUM DELAY_MS [JITTER_MS [SEED [TOKEN]]]``.
"""

from __future__ import annotations

import heapq
import os
import random
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_PF_BIND = 1, 3
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST = 1
NLMSG_ERROR = 2


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("<HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def message(msg_type: int, queue: int, attrs: bytes, seq: int = 0, family: int = socket.AF_UNSPEC) -> bytes:
    """One nfnetlink message to the queue subsystem."""
    body = struct.pack("<BBH", family, 0, socket.htons(queue)) + attrs
    return struct.pack("<IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, NLM_F_REQUEST, seq, 0) + body


def bind_messages(queue: int) -> list[bytes]:
    return [
        message(NFQNL_MSG_CONFIG, 0, _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_PF_BIND, socket.AF_INET)),
                family=socket.AF_INET),
        message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0))),
        message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))),
    ]


def verdict(queue: int, packet_id: int) -> bytes:
    return message(NFQNL_MSG_VERDICT, queue, _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id)))


def packet_ids(data: bytes) -> list[int]:
    """Packet ids of the NFQNL_MSG_PACKET messages in one netlink read."""
    ids, off = [], 0
    while off + 16 <= len(data):
        length, mtype = struct.unpack_from("<IH", data, off)
        if length < 16:
            break
        if mtype == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = off + 20  # nlmsghdr (16) + nfgenmsg (4)
            while a + 4 <= off + length:
                alen, akind = struct.unpack_from("<HH", data, a)
                if alen < 4:
                    break
                if akind & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, a + 4)[0])
                a += (alen + 3) & ~3
        off += (length + 3) & ~3
    return ids


def serve(queue: int, delay_ms: float, jitter_ms: float, seed: int) -> None:
    rnd = random.Random(seed)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((0, 0))
    for m in bind_messages(queue):
        sock.send(m)
    due: list[tuple[float, int]] = []
    print("serving", flush=True)
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        if select.select([sock], [], [], timeout)[0]:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                continue  # ENOBUFS: the kernel dropped messages; those packets are lost, as on a full link
            now = time.monotonic()
            for pid in packet_ids(data):
                extra = rnd.uniform(-jitter_ms, jitter_ms) if jitter_ms else 0.0
                heapq.heappush(due, (now + max(0.0, delay_ms + extra) / 1000, pid))
        now = time.monotonic()
        while due and due[0][0] <= now:
            sock.send(verdict(queue, heapq.heappop(due)[1]))


if __name__ == "__main__":
    args = sys.argv[1:]
    serve(int(args[0]), float(args[1]), float(args[2]) if len(args) > 2 else 0.0,
          int(args[3]) if len(args) > 3 else os.getpid())
