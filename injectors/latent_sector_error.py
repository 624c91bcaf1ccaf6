"""Latent sector errors: reads of chosen blocks of chosen files on the target's volume fail (EIO)
until recovered, while every other block reads and writes normally."""

from __future__ import annotations

import errno
import hashlib
import random
import re
import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (HIDDEN_NAMESPACE, FaultError, Injector, Mechanism, PlannedState, TargetContainer,
                              UserInputError, Verification, dust, injector, install_file, kill_spawned, node_program,
                              node_runner, pick_container, pids_with_cmdline, poll, process_starttime, sectorfs, spawn,
                              target_pid)

DM_DUST = Mechanism("dm-dust", "copy the file onto a dm-dust device whose bad blocks fail reads, and mount it "
                    "over the file in the container", ("device_mapper", "dm_dust", "loop", "nsenter", "python3"))
FUSE = Mechanism("fuse-bad-blocks", "mount a FUSE file system that serves the real data and fails reads of "
                 "the bad blocks on the file in the volume's directory on the node (so restarted containers "
                 "keep it) and clone it into the running container; when the file is a PostgreSQL relation, "
                 "invalidate that relation's cache entry (a no-op catalog update from a local session) so the "
                 "running backends reopen the file through the mount, as they would read a bad disk",
                 ("fuse", "nsenter", "python3"))
WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"

# Checks from the node, through the container's own root, that a block read fails with the errno.
_READ_BLOCK = ("import os,sys\nfd=os.open(sys.argv[1],os.O_RDONLY)\n"
               "try:\n os.pread(fd,int(sys.argv[2]),int(sys.argv[3])); print('ok')\n"
               "except OSError as e:\n print(e.errno)\n")
# Prints the file system type, source and device (major:minor) of the top mount on a path in a
# process's mount namespace.
_TOP_MOUNT = ("import sys\nlast=['-','-','-']\nfor l in open(f'/proc/{sys.argv[1]}/mountinfo'):\n"
              " a,b=l.split(' - ',1)\n if a.split()[4]==sys.argv[2]: last=b.split()[:2]+[a.split()[2]]\n"
              "print(*last)\n")


# Lazily unmounts a path inside a process's mount namespace. Done with setns + umount2 from the
# node's python because the container's image need not have an umount binary.
_UNMOUNT = ("import ctypes,os,sys\nlibc=ctypes.CDLL(None,use_errno=True)\n"
            "ns=os.open(f'/proc/{sys.argv[1]}/ns/mnt',os.O_RDONLY)\n"
            "assert libc.setns(ns,0x00020000)==0,os.strerror(ctypes.get_errno())\n"
            "assert libc.umount2(sys.argv[2].encode(),2)==0,os.strerror(ctypes.get_errno())\n")

# The same file as the node sees it, or nothing when it has no path there (a file of the container's
# own root). The node's mount namespace is that of the container's parent, the runtime's shim (from
# the node pod PID 1 may be unreadable). The container's mount that holds the file is matched to a
# mount of the same device there; a candidate must be the same inode. Prints "SHIM_PID PATH".
_NODE_PATH = (
    "import os,sys,re\npid,path=sys.argv[1],sys.argv[2]\n"
    "node=open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()[1]\n"
    "u=lambda x:re.sub(r'\\\\([0-7]{3})',lambda m:chr(int(m.group(1),8)),x)\n"
    "def mounts(p):\n return [(a[2],u(a[3]),u(a[4])) for a in (l.split(' - ',1)[0].split() for l in open(f'/proc/{p}/mountinfo'))]\n"
    "inside=lambda p,d:d=='/' or p==d or p.startswith(d.rstrip('/')+'/')\n"
    "st=os.stat(f'/proc/{pid}/root'+path)\n"
    "dev,root,mp=max((m for m in mounts(pid) if inside(path,m[2])),key=lambda m:len(m[2]))\n"
    "rel=os.path.relpath(path,mp)\n"
    "for d,r,m in mounts(node):\n"
    " if d!=dev or not inside(root,r) or m.startswith('/proc'): continue\n"
    " c=os.path.normpath(os.path.join(m,os.path.relpath(root,r),rel))\n"
    " try: s=os.stat(f'/proc/{node}/root'+c)\n except OSError: continue\n"
    " if (s.st_dev,s.st_ino)==(st.st_dev,st.st_ino): print(node,c); break\n")
# Lazily unmounts our file systems (fuse, source "volume") on the given paths in every mount
# namespace of the node: the node's own, the running container's, and the copies that containers
# started since then took with the volume. Prints how many came off.
_UNMOUNT_EVERYWHERE = (
    "import ctypes,os,sys\nlibc=ctypes.CDLL(None,use_errno=True)\npaths=set(sys.argv[1:])\n"
    "me=os.open('/proc/self/ns/mnt',os.O_RDONLY)\nseen=set();n=0\n"
    "for p in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    " try:\n"
    "  ino=os.stat(f'/proc/{p}/ns/mnt').st_ino\n"
    "  if ino in seen: continue\n"
    "  seen.add(ino)\n"
    "  hits=[a.split()[4] for a,b in (l.split(' - ',1) for l in open(f'/proc/{p}/mountinfo'))\n"
    "        if b.split()[:2]==['fuse','volume'] and a.split()[4] in paths]\n"
    "  if not hits: continue\n"
    "  ns=os.open(f'/proc/{p}/ns/mnt',os.O_RDONLY)\n"
    " except OSError: continue\n"
    " if libc.setns(ns,0x00020000)!=0: continue\n"
    " for h in reversed(hits): n+=libc.umount2(h.encode(),2)==0\n"
    " os.close(ns)\n"
    " assert libc.setns(me,0x00020000)==0\n"
    "print(n)\n")

# For a file of a PostgreSQL data directory (``<datadir>/base/<database oid>/<file>``) served by the
# target's postmaster: prints the arguments of a local psql session as the data directory's owner
# ("UID GID SOCKET_DIR PORT USER PATH=..."), or nothing when the file is not such a relation file. The
# postmaster writes its data directory, port and socket directory in postmaster.pid; psql is found on
# the container's own PATH.
_PG_SESSION = (
    "import os,re,sys\npid,path=sys.argv[1],sys.argv[2]\nm=re.fullmatch(r'(/.+)/base/(\\d+)/(\\d+)',path)\n"
    "root=f'/proc/{pid}/root'\n"
    "try:\n lines=open(root+m.group(1)+'/postmaster.pid').read().splitlines()\n"
    " env=dict(v.split('=',1) for v in open(f'/proc/{pid}/environ').read().split('\\0') if '=' in v)\n"
    "except (AttributeError,OSError): sys.exit()\n"
    "st=os.stat(root+m.group(1))\n"
    "print(st.st_uid,st.st_gid,lines[4] or '/tmp',lines[3],env.get('POSTGRES_USER') or 'postgres',\n"
    "      'PATH='+env.get('PATH','/usr/bin:/bin'))\n")


def postgres_reopen_sql(path: str) -> tuple[str, str] | None:
    """For a PostgreSQL relation file, (the query naming its database, the statement that makes every
    backend reopen it): a no-op update of the relation's pg_class row commits a relcache invalidation,
    on which each backend closes the relation's files (smgr) and opens them again by path on its
    next use; nothing else changes. None for any other file."""
    m = re.fullmatch(r"/.+/base/(\d+)/(\d+)", path)
    if not m:
        return None
    rel = f"base/{m.group(1)}/{m.group(2)}"
    return (f"SELECT datname FROM pg_database WHERE oid = {m.group(1)}",
            f"UPDATE pg_class SET relname = relname WHERE pg_relation_filepath(oid) = '{rel}'")


class LatentSectorErrorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(..., min_length=1, description="absolute paths of files inside the target container")
    blocks: list[int] | None = Field(None, description="bad block numbers (same for each file); default: seeded; "
                                     "[]: none, the fault plane's volume layer (serves the files, every block good)")
    count: int = Field(1, ge=1, description="how many bad blocks per file when blocks is not given")
    block_size: int = Field(4096, ge=512, description="bytes per block (a page: 4096)")
    errno: Literal["EIO", "ENODATA", "EBADMSG"] = "EIO"


def layer_token(node_path: str, container_id: str, path: str) -> str:
    """The name of the volume layer's server for a file: from where the file lives on the node (so a
    fault planned after a container restart finds it), else from its container and path."""
    return "L" + hashlib.sha256((node_path or f"{container_id}:{path}").encode()).hexdigest()[:12]


def choose_blocks(seed: int, path: str, size: int, block_size: int, count: int) -> list[int]:
    """Seeded choice of ``count`` distinct blocks of a file of ``size`` bytes."""
    n = max(1, -(-size // block_size))
    return sorted(random.Random(f"{seed}:{path}").sample(range(n), min(count, n)))


class SectorErrorState(PlannedState):
    container: dict[str, Any] = Field(default_factory=dict, description="the target (``TargetContainer``)")
    pid: int | None = Field(None, description="a process of the target container, on its node")
    pid_start: str | None = Field(None, description="that process's start time (a reused pid is not it)")
    files: list[dict[str, Any]] = Field(default_factory=list,
                                        description="each file: path, size, blocks, token, node_path, node_ns, "
                                                    "layer (the volume layer's server token)")
    mechanism: str = Field("", description="the mechanism planned (dm_dust or fuse)")


def passed_through(lines: list[str]) -> bool:
    """Whether the server said it passes every block through since it last took bad blocks. Not
    "the last line": a line written after it (another server of the file writing into the same log)
    made recover fail in CI although the server had repaired."""
    last_bad = max((i for i, line in enumerate(lines) if line.startswith("bad blocks")), default=-1)
    return "pass-through" in lines[last_bad + 1:]


@injector("latent_sector_error")
class LatentSectorError(Injector[LatentSectorErrorParams]):
    """Persistent unreadable blocks in files of the target's volume (dm-dust, else FUSE)."""

    Params = LatentSectorErrorParams
    State = SectorErrorState
    mechanisms = (DM_DUST, FUSE)
    targets = ("Pod", "Deployment", "StatefulSet")
    node_level = True

    def dies_with_pod(self) -> bool:
        """Watched always; whether a planned copy dies with its pod is ``carrier_pods``'s answer."""
        return True

    def carrier_pods(self, state: SectorErrorState) -> set[str]:
        """A file served from the volume's directory on the node stays bad for every pod that mounts
        the volume (a real bad sector outlives a restart), so it needs no carrier; a dm-dust mount
        over the file, or the FUSE mount made in the container only (the file has no path on the
        node), goes with the pod, and the fault plane re-applies it to the target's new pod."""
        below_the_pod = state.mechanism == FUSE.name and all(f.get("node_path") for f in state.files)
        return set() if below_the_pod else super().carrier_pods(state)

    def carriers(self, state: SectorErrorState) -> set[str]:
        """A mount made in the container's mount namespace also goes when the container restarts in
        the same pod (its new container gets a fresh mount namespace): carried by the container too."""
        pods = self.carrier_pods(state)
        container_id = (state.container or {}).get("container_id")
        return pods | ({container_id} if pods and container_id else set())

    def plan(self) -> SectorErrorState:
        if any(not p.startswith("/") for p in self.params.paths):
            raise UserInputError("params.paths: give absolute paths inside the container")
        tc = pick_container(self.ctx, self.target)
        runner, pid = target_pid(self.ctx, tc)
        files = []
        for path in self.params.paths:
            proc = runner.run(["stat", "-L", "-c", "%s", f"/proc/{pid}/root{path}"], check=False)
            if proc.returncode != 0:
                raise UserInputError(f"params.paths: {path} does not exist in {tc.pod}/{tc.container}")
            size = int(proc.stdout)
            blocks = self.params.blocks if self.params.blocks is not None else choose_blocks(
                self.ctx.seed, path, size, self.params.block_size, self.params.count)
            token = "v" + hashlib.sha256(f"{tc.container_id}:{path}".encode()).hexdigest()[:12]
            node_ns, node_path = "", ""
            if self.mechanism.name == FUSE.name:
                found = runner.run(["python3", "-c", _NODE_PATH, str(pid), path], check=False).stdout.split(" ", 1)
                node_ns, node_path = (found[0], found[1].strip()) if len(found) == 2 else ("", "")
            layer = layer_token(node_path, tc.container_id, path)
            files.append({"path": path, "size": size, "blocks": blocks, "token": layer if not blocks else token,
                          "node_path": node_path, "node_ns": node_ns, "layer": layer})
        return SectorErrorState(container=tc.as_state(), pid=pid, pid_start=process_starttime(runner, pid),
                                files=files, mechanism=self.mechanism.name)

    def _script(self) -> str:
        return f"{WORK_DIR}/{node_program(sectorfs)[0]}"

    def _top_mount(self, runner: Any, state: SectorErrorState, path: str) -> list[str]:
        """(fstype, source) of the top mount on ``path`` in the container ([] if the container is gone)."""
        if process_starttime(runner, state.pid) != state.pid_start:
            return []
        return runner.run(["python3", "-c", _TOP_MOUNT, str(state.pid), path], check=False).stdout.split()

    def _mounted(self, runner: Any, state: SectorErrorState, f: dict[str, Any]) -> bool:
        top = self._top_mount(runner, state, f["path"])
        if state.mechanism == DM_DUST.name:
            ours = runner.run(["dmsetup", "info", "-c", "--noheadings", "-o", "major,minor", f["token"]],
                              check=False).stdout.replace(" ", "").strip()
            return bool(ours) and top[2:] == [ours]
        return top[:2] == ["fuse", "volume"]

    def inject(self, state: SectorErrorState) -> None:
        tc = TargetContainer.from_state(state.container)
        runner = node_runner(self.ctx, tc.node)
        if process_starttime(runner, state.pid) != state.pid_start:
            raise FaultError(f"container {tc.pod}/{tc.container} restarted since the plan")
        runner.run(["mkdir", "-p", WORK_DIR])
        for f in state.files:
            if state.mechanism == FUSE.name and f["blocks"] and self._layer_server(runner, f):
                self._turn_bad(runner, state, f)
                continue
            if self._mounted(runner, state, f):
                continue
            if state.mechanism == DM_DUST.name:
                self._inject_dust(runner, state, f)
            else:
                self._inject_fuse(runner, state, f, tc)

    def _layer_server(self, runner: Any, f: dict[str, Any]) -> list[tuple[int, str]]:
        """The volume layer's server of the file, when the fault plane serves it (else [])."""
        return pids_with_cmdline(runner, f["layer"]) if f.get("layer") and f["blocks"] else []

    def _turn_bad(self, runner: Any, state: SectorErrorState, f: dict[str, Any]) -> None:
        """Bad blocks in the file system that already serves the file: nothing is mounted, the
        container's mounts stay as they were in the healthy run."""
        nonce = hashlib.sha256(f"{self.ctx.run_id}:{f['token']}".encode()).hexdigest()[:8]
        install_file(runner, f"{WORK_DIR}/{f['layer']}.bad",
                     f"{self.params.errno} {nonce} {','.join(map(str, f['blocks']))}\n")
        for pid, start in self._layer_server(runner, f):
            if process_starttime(runner, pid) == start:
                runner.run(["kill", "-USR2", str(pid)], check=False)
        log = f"{WORK_DIR}/{f['layer']}.log"
        if not poll(lambda: f"bad blocks {nonce}" in self._lines(runner, log), timeout=15, interval=0.3):
            raise FaultError(f"the file system serving {f['path']} did not take the bad blocks: "
                             f"{self._last_line(runner, log)}")
        if not self._mounted(runner, state, f) and f.get("node_path"):  # a container that missed the layer
            runner.run(["python3", "-c", dust.MOVE_MOUNT_SCRIPT, f["node_path"], str(state.pid), f["path"],
                        f["node_ns"]])

    @staticmethod
    def _lines(runner: Any, log: str) -> list[str]:
        """The log's lines. An earlier server of the same file that still serves backends' old
        descriptors writes on at its own offset after a new one truncated the log: NULs."""
        return runner.run(["cat", log], check=False).stdout.replace("\0", "").strip().splitlines()

    @classmethod
    def _last_line(cls, runner: Any, log: str) -> str:
        lines = cls._lines(runner, log)
        return lines[-1] if lines else ""

    def _on_node(self, runner: Any, f: dict[str, Any]) -> bool:
        """Whether our file system is mounted on the file's path on the node."""
        out = runner.run(["python3", "-c", _TOP_MOUNT, f["node_ns"], f["node_path"]], check=False).stdout.split()
        return out[:2] == ["fuse", "volume"]

    def _inject_fuse(self, runner: Any, state: SectorErrorState, f: dict[str, Any], tc: TargetContainer) -> None:
        """Serve the file through sectorfs: mounted on the volume's directory on the node when the
        file has a path there (so a restarted container still has the bad blocks) and cloned into
        the running container; else mounted in the container only."""
        log = f"{WORK_DIR}/{f['token']}.log"
        node_path = f.get("node_path") or ""
        if node_path and self._on_node(runner, f) and not pids_with_cmdline(runner, f["token"]):
            # a server that died (a crash) left its mount answering ENOTCONN: take it off first
            runner.run(["python3", "-c", _UNMOUNT_EVERYWHERE, node_path, f["path"]], check=False)
        if not (node_path and self._on_node(runner, f)):
            install_file(runner, self._script(), node_program(sectorfs)[1])
            spawn(runner, ["python3", self._script(), str(state.pid), f["path"], str(self.params.block_size),
                           ",".join(map(str, f["blocks"])), self.params.errno, f["token"], node_path,
                           f.get("node_ns", "self")], log=log)
            up = (lambda: self._on_node(runner, f)) if node_path else (lambda: self._mounted(runner, state, f))
            if not poll(up, timeout=15, interval=0.3):
                out = runner.run(["cat", log], check=False).stdout.strip()
                raise FaultError(f"the file system on {f['path']} in {tc.pod} did not come up: {out[-500:]}")
        if node_path and not self._mounted(runner, state, f):
            runner.run(["python3", "-c", dust.MOVE_MOUNT_SCRIPT, node_path, str(state.pid), f["path"],
                        f["node_ns"]])
        self._reopen_in_postgres(runner, state, f)

    def _reopen_in_postgres(self, runner: Any, state: SectorErrorState, f: dict[str, Any]) -> None:
        """Backends that opened the file before the mount read it through their old descriptor, past
        the bad blocks (a bad disk would fail them too): when the file is a relation of the target's
        PostgreSQL, have them reopen it through the mount (``postgres_reopen_sql``)."""
        sql = postgres_reopen_sql(f["path"])
        found = runner.run(["python3", "-c", _PG_SESSION, str(state.pid), f["path"]], check=False).stdout.split()
        if sql is None or len(found) != 6:
            return
        uid, gid, sockets, port, user, path_env = found

        def psql(database: str, statement: str) -> str:
            return runner.run(["nsenter", "-t", str(state.pid), "-m", "-r", "-w", "-S", uid, "-G", gid, "--",
                               "env", path_env, "psql", "-h", sockets, "-p", port, "-U", user, "-d", database,
                               "-XAtqc", statement], check=False).stdout.strip()

        database = psql("postgres", sql[0])
        if database:
            psql(database, sql[1])

    def _dust_paths(self, f: dict[str, Any]) -> tuple[str, str, str]:
        image, mnt = f"{WORK_DIR}/{f['token']}.img", f"{WORK_DIR}/{f['token']}.mnt"
        return image, mnt, f"{mnt}/{f['path'].rsplit('/', 1)[-1]}"

    def _inject_dust(self, runner: Any, state: SectorErrorState, f: dict[str, Any]) -> None:
        image, mnt, copy = self._dust_paths(f)
        bs = self.params.block_size
        for cmd in dust.setup_commands(f["token"], image, mnt, dust.image_size(f["size"], bs), bs):
            runner.run(["sh", "-c", cmd])
        runner.run(["sh", "-c", dust.copy_command(f"/proc/{state.pid}/root{f['path']}", copy)])
        physical = runner.run(["python3", "-c", dust.FIBMAP_SCRIPT, copy, ",".join(map(str, f["blocks"]))]
                              ).stdout.strip().split(",")
        for cmd in dust.badblock_commands(f["token"], [int(b) for b in physical]):
            runner.run(["sh", "-c", cmd])
        # drop the copy's cached pages so reads reach the device
        runner.run(["python3", "-c", "import os,sys;fd=os.open(sys.argv[1],os.O_RDONLY);"
                    "os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)", copy])
        runner.run(["python3", "-c", dust.MOVE_MOUNT_SCRIPT, copy, str(state.pid), f["path"]])

    def _reader(self, state: SectorErrorState) -> tuple[Any, int]:
        """The node's runner and the pid of a container to read the files through: the faulted one
        while it runs, else a current container of the target (a restart does not cure bad blocks
        below the pod; reading through the dead container's pid said "not in place" until timeout)."""
        runner = node_runner(self.ctx, state.container["node"])
        if process_starttime(runner, state.pid) == state.pid_start:
            return runner, state.pid
        return target_pid(self.ctx, pick_container(self.ctx, self.target))

    def verify(self, state: SectorErrorState) -> Verification:
        try:
            runner, pid = self._reader(state)
        except (FaultError, UserInputError) as e:
            return Verification(False, f"no running container of the target to read through yet: {e}")
        want = str(getattr(errno, self.params.errno))
        notes, ok = [], True
        for f in state.files:
            view = f"/proc/{pid}/root{f['path']}"
            for b in f["blocks"]:
                got = runner.run(["python3", "-c", _READ_BLOCK, view, str(self.params.block_size),
                                  str(b * self.params.block_size)], check=False).stdout.strip()
                ok = ok and got == want
                notes.append(f"{f['path']} block {b}: {'errno ' + got if got != 'ok' else 'reads fine'}")
        return Verification(ok, "; ".join(notes))

    def _current(self, runner: Any, state: SectorErrorState) -> SectorErrorState:
        """The state with the target's current container process (one restarted since the plan
        has new backends holding the file too)."""
        try:
            _, pid = self._reader(state)
        except Exception:  # noqa: BLE001 - no running target (an app taken down): nothing holds the file
            return state
        return state if pid == state.pid else state.model_copy(update={"pid": pid})

    def _repair(self, runner: Any, f: dict[str, Any], servers: list[tuple[int, str]]) -> bool:
        """Ask the file's servers to pass every block through (a repaired disk); whether they said so."""
        for pid, start in servers:
            if process_starttime(runner, pid) == start:
                runner.run(["kill", "-USR1", str(pid)], check=False)
        log = f"{WORK_DIR}/{f['token']}.log"
        return poll(lambda: passed_through(self._lines(runner, log)), timeout=15, interval=0.2)

    def recover(self, state: SectorErrorState) -> None:
        """Repair, then unmount: database backends that opened the file through the mount keep their
        descriptors, and they read the real data from then on, as from a disk whose bad sectors were
        remapped. The server exits by itself once the last of them closes (a pod that goes closes
        them all); one that did not say it passes through is stopped, as before."""
        runner = node_runner(self.ctx, state.container["node"])
        for f in state.files:
            layer = self._layer_server(runner, f)
            if layer and not pids_with_cmdline(runner, f["token"]):  # bad blocks in the volume layer's server
                if not self._repair(runner, {"token": f["layer"]}, layer):
                    raise FaultError(f"the file system serving {f['path']} did not pass every block through")
                continue
            servers = pids_with_cmdline(runner, f["token"])
            repaired = bool(servers) and self._repair(runner, f, servers)
            if f.get("node_path"):  # every copy, wherever containers took it, before the server goes
                runner.run(["python3", "-c", _UNMOUNT_EVERYWHERE, f["node_path"], f["path"]], check=False)
            if state.mechanism == DM_DUST.name:
                runner.run(["dmsetup", "message", f["token"], "0", "disable"], check=False)
            mounted = False
            for _ in range(5):  # stacked mounts (an inject repeated after a crash) come off one by one
                if not self._mounted(runner, state, f):
                    break
                mounted = True
                runner.run(["python3", "-c", _UNMOUNT, str(state.pid), f["path"]], check=False)
            if state.mechanism == DM_DUST.name:
                image, mnt, copy = self._dust_paths(f)
                if mounted:  # what the app wrote meanwhile went to the copy: put it back
                    runner.run(["sh", "-c", f"cat {shlex.quote(copy)} > /proc/{state.pid}/root{f['path']}"],
                               check=False)
                for cmd in dust.teardown_commands(f["token"], image, mnt):
                    runner.run(["sh", "-c", cmd], check=False)
            if not f["blocks"]:
                # the volume layer ends with the run: backends reopen the file, now the disk's own,
                # so they release the layer's server, which then exits
                self._reopen_in_postgres(runner, self._current(runner, state), f)
            if repaired:  # most go at once (nothing held them open); a held one serves until released
                poll(lambda: not pids_with_cmdline(runner, f["token"]), timeout=3, interval=0.3)
                continue
            for pid, start in pids_with_cmdline(runner, f["token"]):
                kill_spawned(runner, pid, start)
