"""Noise: a short burst of extra requests to one Service (any component, the root cause's too:
extra requests neither cure nor hide a fault)."""

from __future__ import annotations

import shlex
from pydantic import Field

from sregym.injectors import (HIDDEN_NAMESPACE, Injector, Mechanism, NoiseParams, PlannedState, Verification,
                              candidates, choose, injector, install_file, kill_spawned, list_objects, node_runner,
                              pids_with_cmdline, poll, token)

WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"
HTTP_FROM_NODE = Mechanism("http-from-node", "HTTP GETs to the Service's ClusterIP from a node", ("python3",))
# Sends HTTP GETs from a few threads until the deadline; one dot per answered request in the log.
CLIENT = r"""
import socket, sys, threading, time
host, port, seconds, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
end = time.time() + seconds
def run():
    while time.time() < end:
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.sendall(f'GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n'.encode())
            s.recv(1024); s.close(); print('.', end='', flush=True)
        except OSError:
            time.sleep(0.05)
ts = [threading.Thread(target=run) for _ in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
"""


class SpikeParams(NoiseParams):
    threads: int = Field(4, ge=1, le=64)


class LoadSpikeState(PlannedState):
    node: str = Field("", description="the node the extra client runs on")
    service: str = Field("", description="the Service it sends requests to")
    ip: str = Field("", description="the Service's cluster IP")
    port: int = Field(0, description="the Service's port")
    token: str = Field("", description="names the client's processes")
    log: str = Field("", description="the client's log on the node (one dot per answer)")


@injector("noise_load_spike")
class NoiseLoadSpike(Injector[SpikeParams]):
    """Send extra HTTP requests to one Service (ClusterIP) for ``duration`` seconds."""

    Params = SpikeParams
    State = LoadSpikeState
    mechanisms = (HTTP_FROM_NODE,)
    node_level = True

    def plan(self) -> LoadSpikeState:
        services = [s for s in candidates(self.ctx, "Service", self.params.exclude, harmless=True)
                    if s["spec"].get("clusterIP") not in (None, "None") and s["spec"].get("ports")]
        svc = choose(self.ctx.seed, "noise_load_spike", services, "service")
        nodes = sorted(n["metadata"]["name"] for n in list_objects(self.ctx.kube, "Node", None))
        node = choose(self.ctx.seed, "noise_load_spike:node", nodes, "node")
        tok = token("spike", svc["metadata"]["name"], self.ctx.seed)
        return LoadSpikeState(node=node, service=svc["metadata"]["name"], ip=svc["spec"]["clusterIP"],
                              port=svc["spec"]["ports"][0]["port"], token=tok, log=f"{WORK_DIR}/{tok}.log")

    def inject(self, state: LoadSpikeState) -> None:
        runner = node_runner(self.ctx, state.node)
        if pids_with_cmdline(runner, state.token):
            return
        script = f"{WORK_DIR}/{state.token}.py"
        install_file(runner, script, CLIENT)
        argv = ["python3", script, state.ip, str(state.port), str(self.params.duration), str(self.params.threads)]
        runner.run(["sh", "-c", f"setsid {shlex.join(argv)} >{state.log} 2>&1 </dev/null &"])
        poll(lambda: pids_with_cmdline(runner, state.token), 10, 0.2)

    def verify(self, state: LoadSpikeState) -> Verification:
        runner = node_runner(self.ctx, state.node)
        answered = runner.run(["cat", state.log], check=False).stdout.count(".")
        return Verification(answered > 0, f"extra requests answered by {state.service}: {answered}")

    def recover(self, state: LoadSpikeState) -> None:
        runner = node_runner(self.ctx, state.node)
        for pid, start in pids_with_cmdline(runner, state.token):
            kill_spawned(runner, pid, start)
