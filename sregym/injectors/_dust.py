"""The dm-dust way to make blocks of a file unreadable (for nodes with device-mapper's dust target).

The file is copied onto a small ext4 file system on a loop device behind a ``dust`` target; the
file's logical blocks are mapped to device blocks (FIBMAP) and those are marked bad; the copy is
then mounted over the original path inside the container's mount namespace (``open_tree`` +
``move_mount``). On recover the dust target is disabled, the mount removed, the copy's content
(with whatever the app wrote meanwhile) written back into the original file, and everything torn
down. Each step is a command line built here, so unit tests can check what would run.
"""

from __future__ import annotations

import shlex

# Physical (device) block of each logical block of a file: the FIBMAP ioctl (root only).
FIBMAP_SCRIPT = ("import fcntl,os,struct,sys\nfd=os.open(sys.argv[1],os.O_RDONLY)\n"
                 "print(','.join(str(struct.unpack('I',fcntl.ioctl(fd,1,struct.pack('I',int(b))))[0])"
                 " for b in sys.argv[2].split(',')))\n")
# Mount a mount of the node (or of our own namespace) over a path in another process's mount namespace.
MOVE_MOUNT_SCRIPT = (
    # argv: SOURCE PID TARGET [FROM]: clone the mount on SOURCE, as the mount namespace of
    # /proc/FROM sees it (default: our own), onto TARGET in the mount namespace of PID
    "import ctypes,os,sys\nlibc=ctypes.CDLL(None,use_errno=True)\n"
    "def enter(p):\n fd=os.open(f'/proc/{p}/ns/mnt',os.O_RDONLY)\n"
    " assert libc.setns(fd,0x00020000)==0,os.strerror(ctypes.get_errno())\n"
    "if len(sys.argv)>4 and sys.argv[4]!='self': enter(sys.argv[4])\n"
    "fd=libc.syscall(428,-100,sys.argv[1].encode(),1|0o2000000)\n"  # open_tree(AT_FDCWD, OPEN_TREE_CLONE)
    "assert fd>=0,os.strerror(ctypes.get_errno())\n"
    "enter(sys.argv[2])\n"
    "r=libc.syscall(429,fd,b'',-100,sys.argv[3].encode(),4)\n"  # move_mount(..., MOVE_MOUNT_F_EMPTY_PATH)
    "assert r==0,os.strerror(ctypes.get_errno())\n")


def image_size(file_size: int, block_size: int) -> int:
    """Room for the copy, ext4's metadata and growth; a whole number of blocks."""
    size = max(64 << 20, 2 * file_size + (32 << 20))
    return -(-size // block_size) * block_size


def setup_commands(token: str, image: str, mnt: str, size: int, block_size: int) -> list[str]:
    """Loop device, dust target (created disabled: reads pass), ext4, mounted at ``mnt``."""
    q = shlex.quote
    return [
        f"truncate -s {size} {q(image)}",
        f"losetup --find --show {q(image)} > {q(image)}.loop",
        f"dmsetup create {token} --table \"0 {size // 512} dust $(cat {q(image)}.loop) 0 {block_size}\"",
        f"mkfs.ext4 -q -F -b {block_size} /dev/mapper/{token}",
        f"mkdir -p {q(mnt)} && mount /dev/mapper/{token} {q(mnt)}",
    ]


def copy_command(source: str, copy: str) -> str:
    return f"cp --preserve=mode,ownership,timestamps {shlex.quote(source)} {shlex.quote(copy)} && sync"


def badblock_commands(token: str, physical_blocks: list[int]) -> list[str]:
    """Mark the device blocks bad, then make the target fail reads of them."""
    return [f"dmsetup message {token} 0 addbadblock {b}" for b in physical_blocks] + \
        [f"dmsetup message {token} 0 enable"]


def teardown_commands(token: str, image: str, mnt: str) -> list[str]:
    """Everything setup made, removed; each step harmless if already gone."""
    q = shlex.quote
    return [
        f"umount {q(mnt)} 2>/dev/null; true",
        f"dmsetup remove {token} 2>/dev/null; true",
        f"[ -f {q(image)}.loop ] && losetup -d $(cat {q(image)}.loop) 2>/dev/null; true",
        f"rm -rf {q(image)} {q(image)}.loop {q(mnt)}",
    ]
