"""A check by node name reaches what a packet reaches: the name is resolved by walking the lab's routing tables
hop by hop (docs/checks.md), addresses the user gave beat nestlab's automatic ones, an ambiguous name is said
with its candidates, and after a scheduled change the name is resolved again."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import NESTLAB, ROOT, run_cli

# containerlab's way, in a nestlab file: plain Linux routers routing by `ip route`, hosts addressed by exec:
# with a default route
ROUTED = """name: {name}
topology:
  nodes:
    pc1: {exec: ["ip addr add 192.168.1.2/24 dev eth1", "ip route add default via 192.168.1.1"]}
    r1: {sysctls: {net.ipv4.ip_forward: 1},
         exec: ["ip addr add 192.168.1.1/24 dev eth1", "ip addr add 10.0.12.1/24 dev eth2",
                "ip route add 192.168.2.0/24 via 10.0.12.2"]}
    r2: {sysctls: {net.ipv4.ip_forward: 1},
         exec: ["ip addr add 10.0.12.2/24 dev eth1", "ip addr add 192.168.2.1/24 dev eth2",
                "ip route add 192.168.1.0/24 via 10.0.12.1"]}
    pc2: {exec: ["ip addr add 192.168.2.2/24 dev eth1", "ip route add default via 192.168.2.1"]}
  links:
    - endpoints: ["pc1:eth1", "r1:eth1"]
    - endpoints: ["r1:eth2", "r2:eth1"]
      params: {rate: 30mbit}
    - endpoints: ["r2:eth2", "pc2:eth1"]
checks:
  - reach: {from: pc1, to: pc2}
  - rate: {from: pc1, to: pc2, mbit: 30, tolerance: 25%}
  - latency: {from: pc1, to: pc2, ms: 0.5, tolerance: 5ms}
  - reach: {from: pc2, to: pc1}
  - reach: {from: pc1, to: r2}
"""


def _frr(n: int, here: str, there: str, far: str) -> str:
    """A router addressed by its frr.conf (nestlab cannot see those addresses: its link to the other router
    also gets an automatic 10.200.0.x pair) with a static route to the far host's network."""
    return (
        f"frr defaults traditional\nhostname r{n}\n!\ninterface eth1\n ip address {here}\n!\n"
        f"interface eth2\n ip address {there}\n!\nip route {far}\n!\n"
    )


FRR = {
    "r1": _frr(1, "192.168.1.1/24", "10.0.12.1/24", "192.168.2.0/24 10.0.12.2"),
    "r2": _frr(2, "10.0.12.2/24", "192.168.2.1/24", "192.168.1.0/24 10.0.12.1"),
}


def _routed(frr: bool) -> str:
    if not frr:
        return ROUTED
    head, rest = ROUTED.split("    r1:", 1)
    rest = "    pc2:" + rest.split("    pc2:", 1)[1]
    routers = "".join(f"    {r}: {{kind: frr, startup-config: {json.dumps(conf)}}}\n" for r, conf in FRR.items())
    return head + routers + rest


@pytest.mark.parametrize("routers", ["linux", "frr"])
def test_a_routed_lab_addressed_by_exec_holds_its_checks_by_node_name(topo_file, lab_name, routers):
    """pc1's default route matches every address of pc2 alike: asking pc1's kernel alone took the first, an
    automatic 10.200.0.x only its own segment routes (r1: "Network is unreachable").  Walking the routes hop by
    hop takes 192.168.2.2, the address pc1's packets reach; of r2's, the one facing the way in that its user gave
    (10.0.12.2, by exec: or frr.conf), never the automatic one on the same link.  A segment whose interfaces
    exec: addresses gets no automatic address."""
    done = run_cli("check", "-t", str(topo_file(_routed(routers == "frr"))), "--wait", "60", "--format", "json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    reach, rate, latency, back, router = json.loads(done.stdout)["checks"]
    assert all(r["held"] for r in (reach, rate, latency, back, router)), done.stdout
    assert reach["saw"] == "answered from 192.168.2.2 (pc2 is 192.168.2.2 (via 192.168.1.1, /0))", reach
    assert "Mbit/s to 192.168.2.2 (" in rate["saw"] and "to 192.168.2.2 (" in latency["saw"], (rate, latency)
    assert back["saw"].startswith("answered from 192.168.1.2 ("), back
    assert router["saw"].startswith("answered from 10.0.12.2 ("), router
    shown = lambda node, dev: run_cli("exec", "--lab", lab_name, node, "--", "ip", "-4", "-o", "addr", "show", "dev", dev).stdout  # noqa: E731
    assert " 10.200." not in shown("pc2", "eth1"), shown("pc2", "eth1")  # exec: addresses it: nestlab leaves it alone
    if routers == "frr":
        assert " 10.200." in shown("r2", "eth1"), shown("r2", "eth1")  # frr.conf's addresses are not seen: one is added


TWINS = """name: {name}
topology:
  nodes: {a: {}, b: {}}
  links:
    - {endpoints: ["a:eth1", "b:eth1"], ipv4: ["10.0.1.1/24", "10.0.1.2/24"]}
    - {endpoints: ["a:eth2", "b:eth2"], ipv4: ["10.0.2.1/24", "10.0.2.2/24"]}
checks:
  - reach: {from: a, to: b}
  - reach: {from: a, to: "b:eth2"}
  - reach: {from: a, to: b, expect: false}
"""


def test_an_ambiguous_name_says_its_candidates_and_how_to_name_one(topo_file, lab_name):
    """b is reached directly on two links: `to: b` names neither (even with expect: false it does not hold),
    the check says both and how to choose; `to: b:eth2` chooses one."""
    done = run_cli("check", "-t", str(topo_file(TWINS)), "--wait", "2", "--format", "json", timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    plain, chosen, negated = json.loads(done.stdout)["checks"]
    said = (
        "b is ambiguous from a: a packet reaches 10.0.1.2 (b:eth1, a -> b); 10.0.2.2 (b:eth2, a -> b), on different "
        "paths; name one, e.g. to: 10.0.1.2 or to: b:eth1"
    )
    assert not plain["held"] and plain["saw"] == said, plain
    assert not negated["held"] and negated["saw"] == said, negated
    assert chosen["held"] and chosen["saw"] == "answered from 10.0.2.2 (b:eth2 is 10.0.2.2 (directly connected, /24))", chosen


def test_a_check_naming_no_node_is_a_file_error(topo_file):
    bad = topo_file("name: {name}\ntopology:\n  nodes: {a: {}}\nchecks:\n  - reach: {from: a, to: 'ghost:eth1'}\n")
    refused = run_cli("check", "-t", str(bad))
    assert refused.returncode == 2, refused.stderr
    assert "lab.yml:5:" in refused.stderr and "'ghost:eth1' is neither an address nor a node" in refused.stderr, refused.stderr


# pc2 has two ways in: eth1 from r1 (the shorter: chosen first) and eth2 from r2; the schedule takes the first down
TWO_PATHS = """name: {name}
topology:
  nodes:
    pc1: {exec: ["ip addr add 192.168.1.2/24 dev eth1", "ip route add default via 192.168.1.1"]}
    r1: {sysctls: {net.ipv4.ip_forward: 1},
         exec: ["ip addr add 192.168.1.1/24 dev eth1", "ip addr add 192.168.12.1/24 dev eth2", "ip addr add 10.0.12.1/24 dev eth3",
                "ip route add 192.168.22.0/24 via 10.0.12.2"]}
    r2: {sysctls: {net.ipv4.ip_forward: 1},
         exec: ["ip addr add 10.0.12.2/24 dev eth1", "ip addr add 192.168.22.1/24 dev eth2",
                "ip route add 192.168.1.0/24 via 10.0.12.1"]}
    pc2: {exec: ["ip addr add 192.168.12.2/24 dev eth1", "ip addr add 192.168.22.2/24 dev eth2",
                 "ip route add default via 192.168.12.1 metric 10", "ip route add default via 192.168.22.1 metric 20"]}
  links:
    - endpoints: ["pc1:eth1", "r1:eth1"]
    - endpoints: ["r1:eth2", "pc2:eth1"]
    - endpoints: ["r1:eth3", "r2:eth1"]
    - endpoints: ["r2:eth2", "pc2:eth2"]
checks:
  - reach: {from: pc1, to: pc2}
  - latency: {from: pc1, to: pc2, ms: 0.5, tolerance: 5ms}
  - reach: {from: pc1, to: 192.168.12.2}
schedule:
  - {at: 2s, link: ["r1:eth2", "pc2:eth1"], state: down}
"""


def test_after_a_scheduled_change_a_name_is_resolved_again(topo_file):
    """The checks first reach pc2 at 192.168.12.2 (pc1 -> r1 -> pc2); the schedule takes that link down, and
    after it they reach 192.168.22.2, through r2 (the name resolved again from the routes as they are then):
    `run` reports the one check that names 192.168.12.2 (there to show the change took effect) failing to the end,
    and no check naming pc2.  Kept from before the change, the name failed to the end too."""
    done = subprocess.run(
        [*NESTLAB, "run", "-t", str(topo_file(TWO_PATHS))], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    print(done.stderr)  # shown with -s
    after = re.search(r"after [^\n]*down: ([^\n]*)", done.stderr)
    assert after, done.stderr
    assert after.group(1).startswith("1 of 3 checks do not hold again"), done.stderr
    failing = after.group(1).split(" later: ", 1)[1]
    assert "192.168.12.2" in failing and "pc2" not in failing, failing


def test_a_segment_exec_addresses_gets_no_automatic_address():
    """`ip addr add A dev IF` (any spelling of addr, replace, dev first) or `ifconfig IF A` in a node's exec:
    leaves that interface to the user, a bridge port too; the segment's other interfaces, and other segments,
    still get theirs; an IPv6 address or a route changes nothing."""
    from nestlab.lab.lab import Lab
    from nestlab.model.addressing import exec_addressed

    said = [
        "ip addr add 192.168.1.2/24 dev eth1",
        "ip -4 address replace 10.0.0.1/24 brd + dev eth2 && ip link set eth2 up",
        "ip a add dev eth3 10.1.1.1/24",
        "ifconfig eth4 10.0.0.4/24 up",
        "ip -6 addr add 2001:db8::1/64 dev eth5",
        "ip route add default via 192.168.1.1 dev eth6",
        "bash -c 'ip a a 10.2.2.2/24 dev eth7'",
        "ip -br addr add local 10.3.3.3/24 dev eth8",
    ]
    assert exec_addressed(said) == {"eth1", "eth2", "eth3", "eth4", "eth7", "eth8"}
    lab = Lab.from_text(
        "name: auto\ntopology:\n  nodes:\n    a: {exec: ['ip addr add 192.168.1.1/24 dev eth1']}\n    b: {}\n    c: {}\n"
        "    sw: {kind: bridge}\n"
        "  links:\n    - endpoints: [a:eth1, sw:p1]\n    - endpoints: [b:eth1, sw:p2]\n    - endpoints: [b:eth2, c:eth1]\n"
    )
    given = {end.ref: end.ipv4 for link in lab.plan.links.values() for end in link.ends}
    assert given["a:eth1"] == () and given["b:eth1"], given  # a's exec: addresses a's port, not b's
    assert given["b:eth2"] and given["c:eth1"], given  # nobody addresses b-c: nestlab does
