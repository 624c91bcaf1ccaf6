"""DNS failure for the target pod: its queries (for one name, or all) go unanswered."""

from __future__ import annotations

import shlex
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (NOT_LOOPBACK, Mechanism, NetnsState, PodNetworkFault, Verification, chain_script,
                              injector, unchain_script)

DNS_DROP = Mechanism("iptables-dns-drop", "drop the pod's DNS queries (all, or those naming one host) in its netns",
                     ("iptables_string", "nsenter"))


class DnsFailureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, description="only queries for this name (e.g. a service name); default: all")


DNS_QUERY = r"""
import socket, struct, sys
ns = next(l.split()[1] for l in open(sys.argv[1]) if l.startswith('nameserver'))
q = struct.pack('!HHHHHH', 0x5e1f, 0x0100, 1, 0, 0, 0)
q += b''.join(bytes([len(p)]) + p.encode() for p in sys.argv[2].split('.')) + b'\0' + struct.pack('!HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
try:
    s.sendto(q, (ns, 53)); s.recv(512); print('answered')
except OSError:
    print('no answer')
"""


def qname_hex(name: str) -> str:
    """The DNS wire form of the leading labels of ``name`` as an iptables hex-string."""
    return "|" + "".join(f"{len(label):02x}" + label.encode().hex() for label in name.strip(".").split(".")) + "|"


@injector("dns_failure")
class DnsFailure(PodNetworkFault[DnsFailureParams]):
    """Make name resolution fail for the target pod (queries time out, as when DNS is unreachable)."""

    Params = DnsFailureParams
    mechanisms = (DNS_DROP,)

    def plan(self) -> NetnsState:
        match = f"-m string --algo bm --hex-string '{qname_hex(self.params.name)}'" if self.params.name else ""
        # what leaves the pod for a DNS server: a resolver on its loopback (a caching sidecar) still answers
        rules = [f"{NOT_LOOPBACK} -p {proto} --dport 53 {match} -j DROP".replace("  ", " ") for proto in ("udp", "tcp")]
        return self.plan_target(hooks=["OUTPUT"], rules=rules)

    def inject(self, state: NetnsState) -> None:
        self.in_netns(state, chain_script(state.chain, state.hooks, state.rules))

    def verify(self, state: NetnsState) -> Verification:
        # one query to the pod's own nameserver, from its netns (what its resolver would send)
        name = self.params.name or "kubernetes.default"
        self.in_netns(state, f"python3 -c {shlex.quote(DNS_QUERY)} /proc/{state.pid}/root/etc/resolv.conf "
                             f"{shlex.quote(name)}", check=False)
        return self.counted(state, "DNS queries dropped")

    def recover(self, state: NetnsState) -> None:
        self.in_netns(state, unchain_script(state.chain, state.hooks), check=False)
