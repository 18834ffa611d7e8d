#!/usr/bin/env python3
"""Build a two-host lab in code, measure ping and TCP, destroy it.  Run as root: python examples/api_demo.py"""

from nestlab import Lab
from nestlab.bench.tools import iperf3, ping

lab = Lab("apidemo")
lab.add_node("h1")
lab.add_node("h2")
lab.add_node("s1", kind="bridge")
lab.add_link("h1:eth1", "s1:p1", ipv4=["10.0.0.1/24", None])
lab.add_link("h2:eth1", "s1:p2")  # gets 10.0.0.2/24 automatically

with lab.deployed():
    h1, h2 = lab.nodes["h1"], lab.nodes["h2"]
    target = h2.intf("eth1").ip
    print(h1.cmd("ip -br addr show eth1").strip())
    print("ping:", ping(h1, target, count=5))
    print("tcp: ", iperf3(h1, h2, target, seconds=2))
