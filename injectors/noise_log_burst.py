"""Noise: a burst of harmless warning lines in one container's log (any component, the root cause's
too: lines that neither cure nor hide a fault)."""

from __future__ import annotations

import random
import shlex
from datetime import datetime, timezone
from typing import Any

from pydantic import Field

from sregym.injectors import (HIDDEN_NAMESPACE, Injector, Mechanism, NoiseParams, PlannedState, Selector, Verification,
                              candidates, choose, injector, install_file, kill_spawned, node_runner, pick_container,
                              pids_with_cmdline, running, target_pid, token)

WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"
STDOUT = Mechanism("container-stdout", "write lines to the container's stdout from its node", ("python3",))
# Ordinary, harmless warnings of the kind busy services print all day.
WARNINGS = (
    "level=warn msg=\"slow request\" path=/health duration_ms={n}",
    "level=warn msg=\"config key is deprecated and will be ignored in a future release\" key=log.format",
    "level=warn msg=\"retrying metrics flush\" attempt={a} backoff_ms={n}",
    "level=warn msg=\"client closed connection before response was written\"",
    "level=warn msg=\"GC pause longer than expected\" pause_ms={n}",
    "level=warn msg=\"cache entry evicted before expiry\" size_bytes={n}",
)
WRITER = r"""
import sys, time
path, seconds, lines = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
with open(path, 'a') as out:
    for line in lines:
        out.write(line + '\n'); out.flush()
        time.sleep(seconds / max(1, len(lines)))
"""


class LogBurstParams(NoiseParams):
    lines: int = Field(20, ge=1, le=1000)


def warning_lines(seed: int, count: int) -> list[str]:
    rnd = random.Random(f"{seed}:log_burst")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [f"time={now} " + rnd.choice(WARNINGS).format(n=rnd.randint(50, 900), a=rnd.randint(1, 3))
            for _ in range(count)]


class LogBurstState(PlannedState):
    container: dict[str, Any] = Field(default_factory=dict, description="the container whose log gets the burst")
    pid: int | None = Field(None, description="its process whose stdout is written to")
    token: str = Field("", description="names the writer's processes")
    lines: list[str] = Field(default_factory=list, description="the warning lines written")


@injector("noise_log_burst")
class NoiseLogBurst(Injector[LogBurstParams]):
    """Print ``lines`` harmless warnings in one container's log over ``duration`` seconds."""

    Params = LogBurstParams
    State = LogBurstState
    mechanisms = (STDOUT,)
    node_level = True

    def plan(self) -> LogBurstState:
        pod = choose(self.ctx.seed, "noise_log_burst", running(candidates(self.ctx, "Pod", self.params.exclude, harmless=True)), "pod")
        tc = pick_container(self.ctx, Selector(kind="Pod", name=pod["metadata"]["name"],
                                               namespace=pod["metadata"]["namespace"]))
        _, pid = target_pid(self.ctx, tc)
        return LogBurstState(container=tc.as_state(), pid=pid, token=token("log", tc.pod_uid, self.ctx.seed),
                             lines=warning_lines(self.ctx.seed, self.params.lines))

    def inject(self, state: LogBurstState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        if pids_with_cmdline(runner, state.token):
            return
        script = f"{WORK_DIR}/{state.token}.py"
        install_file(runner, script, WRITER)
        argv = ["python3", script, f"/proc/{state.pid}/fd/1", str(self.params.duration), *state.lines]
        runner.run(["sh", "-c", f"setsid {shlex.join(argv)} >/dev/null 2>&1 </dev/null &"])

    def verify(self, state: LogBurstState) -> Verification:
        c = state.container
        logs = self.ctx.kube.kubectl("logs", "-n", c["namespace"], c["pod"], "-c", c["container"], "--tail=200",
                                     check=False).stdout
        seen = sum(1 for line in state.lines if line in logs)
        return Verification(seen > 0, f"warning lines in {c['pod']}'s log: {seen}")

    def recover(self, state: LogBurstState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        for pid, start in pids_with_cmdline(runner, state.token):
            kill_spawned(runner, pid, start)
