"""Disk full: the file system under a path of the target container is filled to (almost) nothing free."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (Injector, Mechanism, MechanismUnavailable, PlannedState, UserInputError, Verification,
                              injector, node_runner, pick_container, target_pid)

FILL = Mechanism("fill-volume", "allocate one hidden file that takes the volume's free space", ("python3",))

# Prints "<st_dev of path> <st_dev of the node's root> <free bytes, root reserve included> <block size>".
_STAT = ("import os,sys\np=sys.argv[1]\nv=os.statvfs(p)\n"
         "print(os.stat(p).st_dev, os.stat(sys.argv[2]).st_dev, v.f_bfree*v.f_frsize, v.f_frsize)\n")
# Allocates a file of the given size (real blocks: fallocate, else writes).
_FILL = ("import os,sys\nfd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT,0o600)\nn=int(sys.argv[2])\n"
         "try:\n os.posix_fallocate(fd,0,n)\nexcept OSError:\n"
         " b=b'\\0'*(1<<20)\n while n>0:\n  n-=os.write(fd,b[:min(n,len(b))])\nos.fsync(fd)\n")
# Tries to write some bytes at the path; prints "ok" or the errno.
_PROBE = ("import os,sys\np=sys.argv[1]\n"
          "try:\n fd=os.open(p,os.O_WRONLY|os.O_CREAT,0o600); os.write(fd,b'x'*int(sys.argv[2])); os.fsync(fd); "
          "os.close(fd); print('ok')\nexcept OSError as e:\n print(e.errno)\nfinally:\n"
          " os.path.exists(p) and os.unlink(p)\n")


class DiskFullParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(..., description="a directory inside the container on the volume to fill, e.g. /data")
    leave_bytes: int = Field(0, ge=0, description="free space to leave (0: writes fail with ENOSPC)")
    max_fill_bytes: int = Field(8 << 30, gt=0, description="refuse volumes with more free space than this")


class DiskFullState(PlannedState):
    container: dict[str, Any] = Field(default_factory=dict, description="the target (``TargetContainer``)")
    pid: int | None = Field(None, description="a process of the target container, on its node")
    file: str = Field("", description="the file that fills the volume, as the node sees it")


@injector("disk_full")
class DiskFull(Injector[DiskFullParams]):
    """Fill the file system under a path of the target container (ENOSPC for the app's writes).
    Refuses when that file system is the node's own root file system (it would fill the node)."""

    Params = DiskFullParams
    State = DiskFullState
    mechanisms = (FILL,)
    targets = ("Pod", "Deployment", "StatefulSet")
    node_level = True
    # The filler is found through the pod (its volume as the container sees it): on a scratch
    # volume (emptyDir) a new pod starts empty, so the fault is re-applied there; on a persistent
    # volume the file stays and the new pod's plan finds nothing left to fill.
    pod_scoped = True

    def plan(self) -> DiskFullState:
        if not self.params.path.startswith("/"):
            raise UserInputError("params.path: give an absolute directory inside the container")
        tc = pick_container(self.ctx, self.target)
        runner, pid = target_pid(self.ctx, tc)
        where = f"/proc/{pid}/root{self.params.path}"
        out = runner.run(["python3", "-c", _STAT, where, runner.host_path("/")], check=False)
        if out.returncode != 0:
            raise UserInputError(f"params.path: {self.params.path} is not a directory in {tc.pod}/{tc.container}")
        dev, root_dev, free, _ = (int(x) for x in out.stdout.split())
        if dev == root_dev:
            raise MechanismUnavailable(f"disk_full: {self.params.path} in {tc.pod} lives on the node's root file "
                                       "system; filling it would fill the node", hint="target a volume with its own file system")
        if free > self.params.max_fill_bytes:
            raise MechanismUnavailable(f"disk_full: {free} bytes free under {self.params.path}, more than "
                                       f"max_fill_bytes={self.params.max_fill_bytes}")
        name = ".cache-" + hashlib.sha256(tc.pod_uid.encode()).hexdigest()[:10]
        return DiskFullState(container=tc.as_state(), pid=pid, file=f"{where.rstrip('/')}/{name}")

    def inject(self, state: DiskFullState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        where = state.file.rsplit("/", 1)[0]
        free = int(runner.run(["python3", "-c", _STAT, where, runner.host_path("/")]).stdout.split()[2])
        size = max(0, free - self.params.leave_bytes)
        if size:
            runner.run(["python3", "-c", _FILL, state.file, str(size)], check=False, timeout=600)

    def verify(self, state: DiskFullState) -> Verification:
        runner = node_runner(self.ctx, state.container["node"])
        probe = state.file + "-probe"
        got = runner.run(["python3", "-c", _PROBE, probe, str(self.params.leave_bytes + (1 << 20))],
                         check=False).stdout.strip()
        return Verification(got == "28", "a 1 MiB write " + ("fails with ENOSPC" if got == "28" else f"gives {got}"))

    def recover(self, state: DiskFullState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        runner.run(["rm", "-f", state.file, state.file + "-probe"], check=False)
