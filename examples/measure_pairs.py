#!/usr/bin/env python3
"""Four UDP pairs started together on a shaped link, three repetitions, with a 95 % interval.

The building blocks of `nestlab bench`: tools as processes in nodes, a barrier start, statistics.
Run as root: python examples/measure_pairs.py
"""

from nestlab import Lab
from nestlab.bench import stats, tools
from nestlab.bench.together import Pair, run_together

lab = Lab("measuredemo")
lab.add_node("server")
lab.add_node("client")
lab.add_link("client:eth1", "server:eth1", ipv4=["10.0.9.2/24", "10.0.9.1/24"], params={"rate": "200mbit"})

with lab.deployed():
    client, server = lab.nodes["client"], lab.nodes["server"]
    per_rep = []
    for rep in range(3):
        pairs = [
            Pair(client, tools.iperf3_command("10.0.9.1", 5201 + i, 2, udp=True, bitrate="100M", length=1200),
                 server, tools.iperf3_server_command("10.0.9.1", 5201 + i))
            for i in range(4)
        ]
        ran = run_together(pairs, timeout=30)
        spread_ms = (max(r.started_ns for r in ran) - min(r.started_ns for r in ran)) / 1e6
        total = sum(tools.parse_iperf3(r.stdout)["mbps"] for r in ran)
        print(f"rep {rep}: 4 pairs started within {spread_ms:.1f} ms, {total:.1f} Mbit/s arrived in all")
        per_rep.append(total)
    s = stats.summarize(per_rep)
    print(f"aggregate: {s['mean']:.1f} Mbit/s, 95 % CI [{s['ci95_low']:.1f}, {s['ci95_high']:.1f}], CV {s['cv_pct']:.1f} %"
          f" on a 200 Mbit/s link (4 x 100 Mbit/s offered)")
