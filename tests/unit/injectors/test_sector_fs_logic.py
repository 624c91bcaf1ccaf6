"""Block arithmetic of the bad-block file system and the delay queue's netlink messages."""

import socket
import struct

from sregym.injectors._delayq import packet_ids, verdict
from sregym.injectors._sectorfs import bad_overlap, covered_blocks


def test_a_read_fails_only_if_it_touches_a_bad_block():
    assert bad_overlap(3 * 4096, 4096, 4096, {3})
    assert bad_overlap(2 * 4096 + 10, 4096, 4096, {3})
    assert not bad_overlap(2 * 4096, 4096, 4096, {3})
    assert not bad_overlap(4 * 4096, 128 * 1024, 4096, {3})
    assert not bad_overlap(0, 0, 4096, {0})


def test_only_fully_overwritten_blocks_are_cleared():
    assert covered_blocks(4096, 8192, 4096) == {1, 2}
    assert covered_blocks(100, 4096, 4096) == set()


def test_packet_ids_are_parsed_from_queue_messages_and_verdicts_accept():
    hdr_attr = struct.pack("<HH", 4 + 7, 1) + struct.pack("!IHB", 77, 0x0800, 3) + b"\0"
    body = struct.pack("<BBH", socket.AF_INET, 0, socket.htons(5)) + hdr_attr
    msg = struct.pack("<IHHII", 16 + len(body), (3 << 8) | 0, 0, 0, 0) + body
    assert packet_ids(msg + msg) == [77, 77]
    v = verdict(5, 77)
    assert struct.unpack_from("!II", v, 24) == (1, 77)
