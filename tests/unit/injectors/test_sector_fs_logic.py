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


def test_bad_blocks_come_to_a_running_server_and_its_cached_pages_are_dropped(tmp_path):
    """The volume layer's server takes bad blocks later (SIGUSR2 reads them from its control file):
    it fails reads of them with the errno named, and asks the kernel to drop the file's cached pages
    (FUSE_NOTIFY_INVAL_INODE on the root, the whole file) so reads reach it; SIGUSR1 repairs."""
    import errno
    import os

    from sregym.injectors._sectorfs import NOTIFY_INVAL_INODE, OUT_HEADER, ROOT_ID, SectorFS, control_reader

    r, w = os.pipe()
    data = tmp_path / "data"
    data.write_bytes(bytes(8 * 4096))
    backing = os.open(data, os.O_RDWR)
    fs = SectorFS(w, backing, 4096, set(), errno.EIO)
    read = struct.pack("<QQI", 0, 3 * 4096, 4096)
    assert fs.handle(15, read) == (0, bytes(4096))
    (tmp_path / "L123.bad").write_text("ENODATA n1 3,5\n")
    fs.turn_bad(control_reader(str(tmp_path / "sectorfs.py"), "L123"))
    assert fs.handle(15, read) == (errno.ENODATA, b"")
    msg = os.read(r, 64)  # blocks until the notifying thread wrote
    length, code, unique = OUT_HEADER.unpack_from(msg)
    assert (code, unique, length) == (NOTIFY_INVAL_INODE, 0, OUT_HEADER.size + 24)
    assert struct.unpack_from("<Qqq", msg, OUT_HEADER.size) == (ROOT_ID, 0, 0)
    fs.repair()
    assert fs.handle(15, read) == (0, bytes(4096))


def test_the_control_file_is_read_in_the_folder_the_server_started_from(tmp_path, capsys):
    """From the node pod the server enters the node's mount namespace before it serves, where its
    script's folder path names the node's folder, not the pod's one the injector writes the control
    file to: it read nothing there and the jobs executor's latent_sector_error cell errored ("did not
    take the bad blocks"). The reader holds the folder as it was at start; the path naming another
    folder later (here: moved away, another made in its place) changes nothing. A control file
    missing is said in the log and the server keeps serving (raised, it ended the serving loop)."""
    import errno
    import os

    from sregym.injectors._sectorfs import SectorFS, control_reader

    started = tmp_path / "run"
    started.mkdir()
    read = control_reader(str(started / "sectorfs.py"), "L1")
    started.rename(tmp_path / "pods-run")
    started.mkdir()
    (started / "L1.bad").write_text("ENODATA other 1\n")  # the same path, another folder
    (tmp_path / "pods-run" / "L1.bad").write_text("EIO n2 2\n")
    assert read() == "EIO n2 2\n"

    r, w = os.pipe()
    data = tmp_path / "data"
    data.write_bytes(bytes(4 * 4096))
    fs = SectorFS(w, os.open(data, os.O_RDWR), 4096, set(), errno.EIO)
    fs.turn_bad(control_reader(str(started / "sectorfs.py"), "L2"))  # no L2.bad
    assert "control file unreadable" in capsys.readouterr().out
    assert fs.handle(15, struct.pack("<QQI", 0, 2 * 4096, 4096)) == (0, bytes(4096))


def test_a_reply_to_a_request_the_kernel_dropped_does_not_end_the_server(monkeypatch):
    """A backend killed mid-read (pg_terminate_backend, a pod restart) makes the kernel drop its
    request; the reply then fails with ENOENT. The volume layer's server lives for the whole run, so
    it must go on serving (it died, leaving the file answering ENOTCONN, in a live test)."""
    import errno

    from sregym.injectors import _sectorfs

    def dropped(fd, data):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(_sectorfs.os, "write", dropped)
    _sectorfs.SectorFS(-1, -1, 4096, set(), errno.EIO).reply(7, 0, b"data")  # no exception


def test_recover_sees_the_repair_whatever_the_log_says_after_it():
    """The server said "pass-through" after it last took bad blocks: a line written after it (a
    second server of the file writing into the same log) does not hide it, an older one does not count."""
    from injectors.latent_sector_error import passed_through

    assert passed_through(["serving", "bad blocks n1", "pass-through", "serving"])
    assert passed_through(["serving", "pass-through"])  # a server mounted by the fault itself
    assert not passed_through(["serving", "pass-through", "bad blocks n2"])  # repaired before, bad again
    assert not passed_through(["serving", "bad blocks n1"])
    assert not passed_through([])
