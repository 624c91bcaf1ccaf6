"""A one-file FUSE file system that serves a file through itself and fails reads of chosen blocks.

Self-contained (standard library + libc through ctypes), because it is shipped to the node and run
there by ``latent_sector_error`` when device-mapper's dm-dust is not available. It speaks the
kernel's FUSE protocol directly over ``/dev/fuse`` (no libfuse needed):

1. open ``/dev/fuse`` and the target file through ``/proc/<pid>/root`` (the container's view),
   keeping the file's descriptor: the data stays where it is and is served through it;
2. enter the container's mount namespace (``setns``) and mount the file system *on the file*
   (``rootmode`` of a regular file), so the container's next ``open`` of that path reaches us;
3. answer requests: reads that touch a bad block fail with the chosen errno, every other read and
   write goes to the real file. A write that covers a whole bad block clears it, as dm-dust does
   (a disk remaps a sector on write).

Processes that opened the file before the mount keep their old descriptor (they read the disk
directly) until they reopen it: the same is true of a bad sector that a cache hides.

Bad blocks can also come later to a server that already serves the file (the fault plane's volume
layer serves a data store's files with none in every run, so the mount is there in healthy runs
too): ``SIGUSR2`` reads ``ERRNO NONCE BLOCKS`` from ``TOKEN.bad`` next to this script (in the folder
it was started from, whatever mount namespace it entered since), makes those blocks bad, drops the
kernel's cached pages of the file (so reads reach the server) and prints ``bad blocks NONCE``.

Recovery is a repaired disk, not a pulled one: ``SIGUSR1`` turns every bad block good (the server
then only passes reads and writes through and prints ``pass-through``), after which recover lazily
unmounts it everywhere. Processes that opened the file through it (database backends keep their
descriptors) go on reading the real data through it; when the last such descriptor closes the
kernel ends the connection (``DESTROY``, or ``ENODEV`` on ``/dev/fuse``) and the server exits.

Usage: ``python3 sectorfs.py PID PATH BLOCK_SIZE BLOCKS ERRNO TOKEN [NODE_PATH [NODE_NS]]`` (BLOCKS
comma separated; TOKEN only names the process so recover can find it). With NODE_PATH (the same file
as the node sees it, on the volume's directory) the mount goes there, in the mount namespace of
``/proc/NODE_NS`` (default ``self``), instead of step 2, and the injector clones it into the running
container; containers started later inherit it with the volume.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV = 2, 4
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid total_extlen padding
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr
OP = {"LOOKUP": 1, "FORGET": 2, "GETATTR": 3, "SETATTR": 4, "OPEN": 14, "READ": 15, "WRITE": 16,
      "STATFS": 17, "RELEASE": 18, "FSYNC": 20, "FLUSH": 25, "INIT": 26, "ACCESS": 34, "INTERRUPT": 36,
      "DESTROY": 38, "BATCH_FORGET": 42, "FALLOCATE": 43}
NO_REPLY = {OP["FORGET"], OP["BATCH_FORGET"], OP["INTERRUPT"]}
NOTIFY_INVAL_INODE, ROOT_ID = 2, 1
FATTR_MODE, FATTR_UID, FATTR_GID, FATTR_SIZE = 1, 2, 4, 8
MAX_WRITE = 128 * 1024


def bad_overlap(offset: int, size: int, block_size: int, bad: set[int]) -> bool:
    """Whether the byte range [offset, offset+size) touches a bad block."""
    if size <= 0:
        return False
    first, last = offset // block_size, (offset + size - 1) // block_size
    return any(first <= b <= last for b in bad)


def covered_blocks(offset: int, size: int, block_size: int) -> set[int]:
    """Blocks that a write of [offset, offset+size) overwrites completely."""
    first = -(-offset // block_size)
    end = (offset + size) // block_size
    return set(range(first, end))


class SectorFS:
    def __init__(self, fuse_fd: int, backing_fd: int, block_size: int, bad: set[int], err: int):
        self.fd, self.backing, self.block_size, self.bad, self.err = fuse_fd, backing_fd, block_size, bad, err

    def repair(self, *_: object) -> None:
        """Every block reads again (a ``SIGUSR1`` handler: recover asks for it before unmounting)."""
        self.bad = set()
        print("pass-through", flush=True)

    def turn_bad(self, read_control: Callable[[], str]) -> None:
        """Make the blocks the control file names bad (a ``SIGUSR2`` handler; ``control_reader``). The
        kernel may hold pages of the file read while they were good: they are dropped
        (``FUSE_NOTIFY_INVAL_INODE``) from another thread, since the kernel waits for locked pages
        whose reads this thread answers. An unreadable control file is said in the log and changes
        nothing: raised here, in the serving loop's read, it would end the server."""
        try:
            text = read_control()
        except OSError as e:
            print(f"control file unreadable: {e}", flush=True)
            return
        name, nonce, blocks = (text.split() + ["", "", ""])[:3]
        self.err = getattr(errno, name, errno.EIO)
        self.bad = {int(b) for b in blocks.split(",") if b}

        def drop_cache() -> None:
            try:
                os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + 24, NOTIFY_INVAL_INODE, 0)
                         + struct.pack("<Qqq", ROOT_ID, 0, 0))
            except OSError:
                pass  # nothing cached
            print(f"bad blocks {nonce}", flush=True)

        threading.Thread(target=drop_cache, daemon=True).start()

    def attr(self) -> bytes:
        st = os.fstat(self.backing)
        fattr = ATTR.pack(1, st.st_size, st.st_blocks, int(st.st_atime), int(st.st_mtime), int(st.st_ctime),
                          st.st_atime_ns % 10**9, st.st_mtime_ns % 10**9, st.st_ctime_ns % 10**9,
                          st.st_mode, 1, st.st_uid, st.st_gid, 0, st.st_blksize, 0)
        return struct.pack("<QII", 0, 0, 0) + fattr  # attr_valid 0: always ask again

    def reply(self, unique: int, error: int = 0, body: bytes = b"") -> None:
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)
        except FileNotFoundError:
            pass  # the request was interrupted (its process was killed): the kernel forgot it

    def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == OP["INIT"]:
            major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
            out = struct.pack("<IIIIHHIIHHII", 7, min(minor, 31), readahead, 0, 16, 12, MAX_WRITE, 1, 0, 0, 0, 0)
            return 0, out + b"\0" * (64 - len(out))
        if opcode in (OP["GETATTR"],):
            return 0, self.attr()
        if opcode == OP["SETATTR"]:
            valid = struct.unpack_from("<I", body)[0]
            size = struct.unpack_from("<Q", body, 16)[0]
            mode, _, uid, gid = struct.unpack_from("<IIII", body, 68)
            if valid & FATTR_SIZE:
                os.ftruncate(self.backing, size)
            if valid & FATTR_MODE:
                os.fchmod(self.backing, mode & 0o7777)
            if valid & (FATTR_UID | FATTR_GID):
                os.fchown(self.backing, uid if valid & FATTR_UID else -1, gid if valid & FATTR_GID else -1)
            return 0, self.attr()
        if opcode == OP["OPEN"]:
            return 0, struct.pack("<QII", 0, 0, 0)
        if opcode == OP["READ"]:
            _fh, offset, size = struct.unpack_from("<QQI", body)
            if bad_overlap(offset, size, self.block_size, self.bad):
                return self.err, b""
            return 0, os.pread(self.backing, size, offset)
        if opcode == OP["WRITE"]:
            _fh, offset, size = struct.unpack_from("<QQI", body)
            data = body[40:40 + size]
            written = os.pwrite(self.backing, data, offset)
            self.bad -= covered_blocks(offset, written, self.block_size)
            return 0, struct.pack("<II", written, 0)
        if opcode == OP["FSYNC"]:
            os.fsync(self.backing)
            return 0, b""
        if opcode in (OP["FLUSH"], OP["RELEASE"], OP["ACCESS"]):
            return 0, b""
        if opcode == OP["FALLOCATE"]:
            _fh, offset, length, _mode = struct.unpack_from("<QQQI", body)
            os.posix_fallocate(self.backing, offset, length)
            return 0, b""
        if opcode == OP["STATFS"]:
            st = os.fstatvfs(self.backing)
            return 0, struct.pack("<QQQQQIIII", st.f_blocks, st.f_bfree, st.f_bavail, st.f_files, st.f_ffree,
                                  st.f_bsize, st.f_namemax, st.f_frsize, 0) + b"\0" * 24
        if opcode == OP["LOOKUP"]:
            return errno.ENOENT, b""
        return errno.ENOSYS, b""

    def serve(self) -> None:
        while True:
            try:
                msg = os.read(self.fd, MAX_WRITE + 4096)
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                return  # ENODEV: unmounted (recover) or the container's mount namespace is gone
            _len, opcode, unique, *_ = IN_HEADER.unpack_from(msg)
            if opcode in NO_REPLY:
                continue
            if opcode == OP["DESTROY"]:
                self.reply(unique)
                return
            try:
                error, body = self.handle(opcode, msg[IN_HEADER.size:])
            except OSError as e:
                error, body = e.errno or errno.EIO, b""
            self.reply(unique, error, body)


def mount_in_container(pid: int, path: str, fuse_fd: int, mode: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    if libc.setns(ns, CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "setns into the container's mount namespace")
    opts = f"fd={fuse_fd},rootmode={mode:o},user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"volume", path.encode(), b"fuse", MS_NOSUID | MS_NODEV, opts) != 0:
        raise OSError(ctypes.get_errno(), f"mount on {path}")


def enter_mount_ns(ns_path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(os.open(ns_path, os.O_RDONLY), CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), f"setns into {ns_path}")


def mount_here(path: str, fuse_fd: int, mode: int) -> None:
    """Mount on ``path`` in this process's own mount namespace (the node's view of the volume)."""
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fuse_fd},rootmode={mode:o},user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"volume", path.encode(), b"fuse", MS_NOSUID | MS_NODEV, opts) != 0:
        raise OSError(ctypes.get_errno(), f"mount on {path}")


def control_reader(script: str, token: str) -> Callable[[], str]:
    """A reader of ``TOKEN.bad`` in the folder of ``script`` as it is now, through a descriptor of
    that folder: the server then enters the node's mount namespace (when started from the node pod),
    where the same path names the node's folder, not the pod's one the injector writes to."""
    folder = os.open(os.path.dirname(os.path.abspath(script)), os.O_RDONLY | os.O_DIRECTORY)
    name = f"{token}.bad"

    def read() -> str:
        with open(os.open(name, os.O_RDONLY, dir_fd=folder)) as f:
            return f.read()
    return read


def main(argv: list[str]) -> None:
    pid, path, block_size, blocks, err = int(argv[1]), argv[2], int(argv[3]), argv[4], argv[5]
    node_path = argv[7] if len(argv) > 7 and argv[7] else None
    node_ns = argv[8] if len(argv) > 8 else "self"
    bad = {int(b) for b in blocks.split(",") if b}
    fuse_fd = os.open("/dev/fuse", os.O_RDWR)
    read_control = control_reader(argv[0], argv[6])  # before any setns
    if node_path:
        # on the volume's own directory on the node: every container that mounts the volume later
        # (a restarted database) binds it with this mount inside, as a disk's bad sector would stay
        if node_ns != "self":  # from the node pod: into the node's own mount namespace first
            enter_mount_ns(f"/proc/{node_ns}/ns/mnt")
        backing = os.open(node_path, os.O_RDWR)
        mount_here(node_path, fuse_fd, 0o100000)
    else:
        backing = os.open(f"/proc/{pid}/root/{path.lstrip('/')}", os.O_RDWR)
        mount_in_container(pid, path, fuse_fd, 0o100000)
    fs = SectorFS(fuse_fd, backing, block_size, bad, getattr(errno, err))
    signal.signal(signal.SIGUSR1, fs.repair)
    signal.signal(signal.SIGUSR2, lambda *_: fs.turn_bad(read_control))
    print("serving", flush=True)
    fs.serve()


if __name__ == "__main__":
    main(sys.argv)
