"""Added latency on the target pod's traffic.

Mechanisms, most faithful first: ``netem`` (a delay qdisc: every packet, exact delay and jitter);
``nfqueue-delay`` (iptables hands each outgoing packet to a small process in the pod's netns that
releases it after the delay: every packet, exact delay and jitter, a little CPU per packet);
``tbf-queueing`` (a slow token bucket with a deep queue: delay appears only while the pod sends
faster than the rate, so it grows with load and is zero for sparse traffic; the least faithful).
"""

from __future__ import annotations

import hashlib
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (DEFAULT_DEV, HIDDEN_NAMESPACE, FaultError, Mechanism, NetnsState, PodNetworkFault,
                              Verification, chain_script, clear_root_script, delayq, injector, install_file,
                              kill_spawned, node_program, pids_with_cmdline, poll, root_qdisc_script, tbf_script,
                              unchain_script)

NETEM = Mechanism("netem", "netem delay qdisc on the pod's interface", ("netem", "nsenter"))
NFQUEUE = Mechanism("nfqueue-delay", "hold each outgoing packet in user space for the delay (NFQUEUE)",
                    ("nfqueue", "nsenter", "python3"))
TBF_QUEUE = Mechanism("tbf-queueing", "queueing delay behind a slow token bucket (only under load)",
                      ("tbf", "nsenter"))
WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"


class LatencyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    delay_ms: float = Field(200, gt=0, le=60000)
    jitter_ms: float = Field(0, ge=0)
    peer_cidr: str | None = Field(None, description="only traffic to this address or CIDR (nfqueue-delay)")
    tbf_rate: str = Field("256kbit", description="tbf-queueing: the slow rate that builds the queue")


def netem_script(delay_ms: float, jitter_ms: float) -> str:
    jitter = f" {jitter_ms}ms" if jitter_ms else ""
    return f"tc qdisc replace dev {DEFAULT_DEV} root netem delay {delay_ms}ms{jitter}"


def queue_number(token: str) -> int:
    return 1000 + int(hashlib.sha256(token.encode()).hexdigest()[:4], 16) % 60000


class LatencyState(NetnsState):
    queue: int | None = Field(None, description="the NFQUEUE number the delay program reads (iptables mechanism)")


@injector("network_latency")
class NetworkLatency(PodNetworkFault[LatencyParams]):
    """Delay the target pod's outgoing packets (netem, else a user-space delay queue, else tbf queueing)."""

    Params = LatencyParams
    State = LatencyState
    mechanisms = (NETEM, NFQUEUE, TBF_QUEUE)

    def plan(self) -> LatencyState:
        state = self.plan_target()
        state.queue = queue_number(state.chain)
        dest = f"-d {self.params.peer_cidr} " if self.params.peer_cidr else ""
        # not the loopback: a slow link delays what leaves the pod, not its processes talking to each
        # other (an exec probe's redis-cli to 127.0.0.1 timed out and turned the pod NotReady)
        state.rules = [f"! -o lo {dest}-j NFQUEUE --queue-num {state.queue} --queue-bypass"]
        return state

    def inject(self, state: LatencyState) -> None:
        p, m = self.params, self.mechanism.name
        if m == NETEM.name:
            self.in_netns(state, netem_script(p.delay_ms, p.jitter_ms))
        elif m == TBF_QUEUE.name:
            # latency = how long a packet may wait: deep enough that the queue delays instead of drops
            self.in_netns(state, tbf_script(p.tbf_rate, "16kbit", f"{int(p.delay_ms * 5)}ms"))
        else:
            runner = self.runner(state)
            if not pids_with_cmdline(runner, state.chain):
                name, source = node_program(delayq)
                script = f"{WORK_DIR}/{name}"
                install_file(runner, script, source)
                log = f"{WORK_DIR}/{state.chain}.log"
                runner.run(["sh", "-c", f"setsid nsenter -t {state.pid} -n -- python3 {script} {state.queue} "
                                        f"{p.delay_ms} {p.jitter_ms} {self.ctx.seed} {state.chain} "
                                        f">{log} 2>&1 </dev/null &"])
                if not poll(lambda: "serving" in runner.run(["cat", log], check=False).stdout, 10, 0.2):
                    raise FaultError(f"the delay queue did not start: {runner.run(['cat', log], check=False).stdout}")
            self.in_netns(state, chain_script(state.chain, ["OUTPUT"], state.rules))

    def verify(self, state: LatencyState) -> Verification:
        if self.mechanism.name == NFQUEUE.name:
            running = bool(pids_with_cmdline(self.runner(state), state.chain))
            v = self.counted(state, "packets delayed")
            return Verification(running and v.ok, v.detail + ("" if running else "; the delay queue is not running"))
        out = self.in_netns(state, root_qdisc_script(), check=False) or ""
        kind = "netem" if self.mechanism.name == NETEM.name else "tbf"
        return Verification(out.startswith(f"qdisc {kind}"), out.strip().splitlines()[0] if out.strip() else "pod gone")

    def recover(self, state: LatencyState) -> None:
        if self.mechanism.name == NFQUEUE.name:
            self.in_netns(state, unchain_script(state.chain, ["OUTPUT"]), check=False)
            runner = self.runner(state)
            for pid, start in pids_with_cmdline(runner, state.chain):
                kill_spawned(runner, pid, start)
        else:
            self.in_netns(state, clear_root_script(), check=False)
