"""Fuzzed topology files (issue 16, first part): mutated example files and generated near-valid topologies.

Every input file either loads (and plans) or is refused with a TopologyError that names the line of
every problem (the CLI exits 2 with file:line:col): never a LabError (exit 1) or another exception,
which the CLI would show as a traceback.  Topology files, Go templates and their variables, Kathará
labs (lab.conf, lab.dep, startup files) and server inventories are fuzzed alike.  Hypothesis generates the cases; the run is
derandomized so CI sees the same cases every time, and NESTLAB_FUZZ_EXAMPLES scales it up (a stress
run: NESTLAB_FUZZ_EXAMPLES=10000).
"""

from __future__ import annotations

import contextlib
import os

import pytest
import yaml
from conftest import ROOT, root_links, run_cli

from nestlab import Lab
from nestlab.engine import state
from nestlab.errors import LabError
from nestlab.model.errors import TopologyError

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis generates the cases (make deps installs it)")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("NESTLAB_FUZZ_EXAMPLES", "250"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 1000,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = [
    p.read_bytes()
    for p in sorted((ROOT / "examples").glob("*.yml"))
    + sorted((FIXTURES / "clab-smoke").glob("*.yml"))
    + sorted((FIXTURES / "clab-forms").glob("*.yml"))
]
TEMPLATES = [
    (p.read_bytes(), p.with_name(p.name.replace(".gotmpl", "_vars.yaml")).read_bytes())
    for p in sorted((FIXTURES / "clab-templates").glob("*.gotmpl"))
]
TOKENS = [
    b"\x00",
    b"\xff",
    b"\xc3",
    b"{{",
    b"}}",
    b"{{ .x }}",
    b"${X}",
    b": ",
    b"- ",
    b"\t",
    b"&a ",
    b"*a",
    b"!!python/object:os.system ",
    b"? ",
    b"[",
    b"]",
    b"{",
    b"}",
    b"'",
    b'"',
    b"\n  ",
    b"\n",
    b"#",
    b"~",
    b"null",
    b"-1",
    b"1e999",
    b"nan",
    b"0x10",
    b"\xef\xbb\xbf",
]


def accepts_or_refuses(path) -> None:
    """Load and plan ``path``; a refusal must be ours (with a location), nothing else may escape."""
    from nestlab import sites
    from nestlab.lab import schedule

    try:
        lab = Lab.from_file(path)
        site = sites.chosen(lab.blueprint)
        checked = site.check(lab.blueprint, machine=False)  # what deploy checks of the file (pins, placement)
        schedule.timeline(Lab.of(checked, site))  # what `nestlab run` plays, from the lab as planned to be made
    except TopologyError as exc:
        event("refused")
        placed(exc)
        return
    event("loaded and planned")


def placed(exc: TopologyError) -> None:
    """A refused file names the line of every problem (the CLI then exits 2 with file:line:col)."""
    unplaced = [p.render(exc.source) for p in exc.problems if p.line is None]
    assert not unplaced, unplaced


def mutate(data: bytes, edits) -> bytes:
    """Apply byte edits to ``data``: insert, delete or replace bytes at a point, duplicate the line
    there, or cut the file there."""
    for op, where, payload in edits:
        at = int(where * len(data))
        if op == "insert":
            data = data[:at] + payload + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + len(payload) :]
        elif op == "replace":
            data = data[:at] + payload + data[at + len(payload) :]
        elif op == "duplicate":
            line_start = data.rfind(b"\n", 0, at) + 1
            line_end = data.find(b"\n", at)
            data = (
                data[:line_end] + data[line_start - 1 if line_start else 0 : line_end] + data[line_end:] if line_end > 0 else data
            )
        else:
            data = data[:at]
    return data


mutation = st.tuples(
    st.sampled_from(["insert", "delete", "replace", "duplicate", "truncate"]),
    st.floats(0, 1),
    st.one_of(st.sampled_from(TOKENS), st.binary(min_size=1, max_size=6)),
)


@FUZZ
@given(seed=st.sampled_from(SEEDS), edits=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_files_load_or_are_refused_cleanly(tmp_path_factory, seed, edits):
    path = tmp_path_factory.mktemp("fuzz") / "lab.yml"
    path.write_bytes(mutate(seed, edits))
    accepts_or_refuses(path)


@FUZZ
@given(seed=st.sampled_from(TEMPLATES), template=st.lists(mutation, max_size=3), variables=st.lists(mutation, max_size=3))
def test_mutated_go_templates_and_their_variables_load_or_are_refused_cleanly(tmp_path_factory, seed, template, variables):
    """containerlab's Go-template topologies and their _vars files, mutated: rendered and loaded, or refused at a line
    of the template, of the variables file or of the rendered text."""
    folder = tmp_path_factory.mktemp("tmpl")
    (folder / "lab.clab.gotmpl").write_bytes(mutate(seed[0], template))
    (folder / "lab.clab_vars.yaml").write_bytes(mutate(seed[1], variables))
    accepts_or_refuses(folder / "lab.clab.gotmpl")


NAMES = st.sampled_from(["h1", "h2", "sw", "r1", "n-1", "bad name", "", "x" * 20, "a/b", "local", "mgmt-net"])
IFACES = st.sampled_from(["eth1", "eth2", "lo", "", "toolonginterfacename0", "p1", "e1-1"])
ENDPOINT = st.one_of(
    st.builds(lambda n, i: f"{n}:{i}", NAMES, IFACES),
    st.text(max_size=6),
    st.sampled_from(["host:veth9", "macvlan:eth0", "mgmt-net:m1"]),
    st.fixed_dictionaries(
        {"node": NAMES, "interface": IFACES}, optional={"mac": st.sampled_from(["02:00:00:00:00:01", "01:00:5e:00:00:01", "zz"])}
    ),
)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(allow_nan=True), st.text(max_size=6))
NODE = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.one_of(st.sampled_from(["linux", "bridge", "ovs", "frr", "host", "bogus"]), SCALAR),
        "exec": st.one_of(st.lists(st.text(max_size=5), max_size=2), SCALAR),
        "sysctls": st.dictionaries(st.sampled_from(["net.ipv4.ip_forward", "kernel.x", "net.bogus", ""]), SCALAR, max_size=2),
        "mode": st.sampled_from(["netns", "none", "host", "x"]),
        "resources": st.fixed_dictionaries(
            {}, optional={"cpus": SCALAR, "memory": st.sampled_from(["64m", "1G", "-1", "x", 5]), "pids": SCALAR}
        ),
        "cpu": SCALAR,
        "memory": st.sampled_from(["64Mb", "1G", "x"]),
        "ports": st.lists(st.sampled_from(["80:80", "0.0.0.0:1:1", "99999:1", "a:b", "8080:80/udp", 80]), max_size=2),
        "server": st.sampled_from(["s1", "s9"]),
        "cmd": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=3), max_size=2)),
        "stages": st.dictionaries(
            st.sampled_from(["create", "configure", "boot"]),
            st.fixed_dictionaries(
                {},
                optional={
                    "wait-for": st.lists(
                        st.fixed_dictionaries({"node": NAMES}, optional={"stage": st.sampled_from(["healthy", "exit", "x"])}),
                        max_size=2,
                    )
                },
            ),
            max_size=2,
        ),
        "components": st.dictionaries(st.sampled_from(["c1", "C!", "self", "gnab"]), st.just({}), max_size=2),
        "binds": st.lists(st.sampled_from(["/etc/hosts:/etc/hosts:ro", "nope:/x", "/tmp:/run/x", "a"]), max_size=2),
        "group": st.sampled_from(["g1", "missing"]),
        "startup-delay": SCALAR,
        "labels": st.dictionaries(st.text(max_size=3), SCALAR, max_size=2),
    },
)
LINK = st.fixed_dictionaries(
    {"endpoints": st.lists(ENDPOINT, max_size=3)},
    optional={
        "ipv4": st.lists(
            st.one_of(st.none(), st.sampled_from(["10.0.0.1/24", "300.1.1.1/24", "x", "10.0.0.1", "10.0.0.2/24"])), max_size=3
        ),
        "ipv6": st.lists(st.one_of(st.none(), st.sampled_from(["fd00::1/64", "zz::/64"])), max_size=3),
        "mtu": SCALAR,
        "paths": SCALAR,
        "type": st.sampled_from(["veth", "vxlan", "dummy", "gretap"]),
        "params": st.fixed_dictionaries(
            {},
            optional={
                "rate": st.sampled_from(["1gbit", "0", "x", "500gbit", "10mbit"]),
                "delay": st.sampled_from(["10ms", "-1ms", "x"]),
                "loss": SCALAR,
                "state": st.sampled_from(["up", "down", "sideways"]),
                "a": st.fixed_dictionaries({}, optional={"rate": st.just("1mbit")}),
            },
        ),
        "mode": st.sampled_from(["veth", "bridge", "macvlan", "vxlan", "vxlan-remote", "host", "bogus"]),
        "remote": st.sampled_from(["198.18.0.9", "x"]),
        "vni": SCALAR,
        "parent": st.sampled_from(["server:nic0", "eth0", "x:y"]),
        "host_interface": st.sampled_from(["v1", "bad name"]),
    },
)
SCHEDULE = st.lists(
    st.fixed_dictionaries(
        {"at": st.one_of(st.sampled_from(["0s", "1.5s", "20ms", "-1s", "1e9s", "x"]), SCALAR)},
        optional={
            "link": st.lists(st.one_of(st.builds(lambda n, i: f"{n}:{i}", NAMES, IFACES), SCALAR), max_size=3),
            "node": NAMES,
            "action": st.sampled_from(["add", "remove", "stop", "start", "x"]),
            "state": st.sampled_from(["up", "down", "x"]),
            "set": st.fixed_dictionaries(
                {},
                optional={"rate": st.sampled_from(["10mbit", "0", "x"]), "delay": st.sampled_from(["5ms", "x"]), "bogus": SCALAR},
            ),
            "direction": st.sampled_from(["both", "a", "b", "x"]),
        },
    ),
    max_size=4,
)
TOPOLOGY = st.fixed_dictionaries(
    {
        "name": st.one_of(NAMES, SCALAR),
        "topology": st.fixed_dictionaries(
            {"nodes": st.dictionaries(NAMES, st.one_of(NODE, st.none()), max_size=5), "links": st.lists(LINK, max_size=5)},
            optional={
                "groups": st.dictionaries(st.sampled_from(["g1", "g2"]), NODE, max_size=1),
                "kinds": st.dictionaries(st.sampled_from(["linux", "bridge"]), NODE, max_size=1),
                "defaults": NODE,
            },
        ),
    },
    optional={
        "ipv4_pool": st.sampled_from(["10.0.0.0/8", "10.0.0.0/31", "x", None]),
        "allow_host_ports": SCALAR,
        "servers": st.dictionaries(
            st.sampled_from(["s1", "s 2"]),
            st.fixed_dictionaries({"address": st.sampled_from(["198.18.0.1", "host.example"])}, optional={"weight": SCALAR}),
            max_size=2,
        ),
        "hosts": st.dictionaries(st.sampled_from(["server", "h1"]), st.just({}), max_size=1),
        "bogus": SCALAR,
        "schedule": SCHEDULE,
        "dynamics": st.fixed_dictionaries(
            {"graph": st.sampled_from(["missing.txt", ""])}, optional={"nodes": st.lists(NAMES, max_size=2)}
        ),
    },
)


@st.composite
def near_valid(draw):
    """A valid lab (hosts and switches, links between them, addresses or not), then one key made wrong or odd."""
    hosts = [f"h{i}" for i in range(draw(st.integers(1, 6)))]
    switches = [f"sw{i}" for i in range(draw(st.integers(0, 2)))]
    nodes = {h: {} for h in hosts} | {s: {"kind": "bridge"} for s in switches}
    links, used = [], set()
    for _ in range(draw(st.integers(0, 8))):
        a, b = draw(st.sampled_from(hosts)), draw(st.sampled_from(hosts + switches))
        ia, ib = f"eth{len([u for u in used if u[0] == a]) + 1}", f"p{len(used)}"
        if a == b:
            continue
        used |= {(a, ia), (b, ib)}
        link = {"endpoints": [f"{a}:{ia}", f"{b}:{ib}"]}
        if draw(st.booleans()):
            link["params"] = {"rate": draw(st.sampled_from(["10mbit", "1gbit"])), "delay": draw(st.sampled_from(["1ms", "0ms"]))}
        if draw(st.booleans()):
            link["mtu"] = draw(st.integers(1280, 9000))
        links.append(link)
    data = {
        "name": "fz",
        "ipv4_pool": draw(st.sampled_from(["10.200.0.0/16", "10.0.0.0/29", "192.168.0.0/24"])),
        "topology": {"nodes": nodes, "links": links},
    }
    if links and draw(st.booleans()):  # a schedule over the lab's own links
        a, b = links[0]["endpoints"]
        data["schedule"] = [
            {
                "at": f"{0.5 * i}s",
                "link": [a, b],
                **({"state": draw(st.sampled_from(["down", "up"]))} if i % 2 else {"set": {"rate": "5mbit"}}),
            }
            for i in range(1, draw(st.integers(1, 4)) + 1)
        ]
    if draw(st.booleans()):  # one odd key, anywhere
        where = draw(st.sampled_from(["node", "link", "top", "schedule"]))
        key, value = draw(st.sampled_from(["kind", "mode", "mtu", "ipv4", "exec", "sysctls", "bogus", "params"])), draw(SCALAR)
        target = (
            nodes[draw(st.sampled_from(hosts))]
            if where == "node"
            else links[0]
            if where == "link" and links
            else data["schedule"][0]
            if where == "schedule" and data.get("schedule")
            else data
        )
        target[key] = value
    return data


@FUZZ
@given(data=st.one_of(TOPOLOGY, near_valid()))
def test_generated_topologies_load_or_are_refused_cleanly(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("gen") / "lab.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    accepts_or_refuses(path)


@pytest.mark.parametrize(
    "content, where",
    [
        (b"name: x\x00\ntopology: {}\n", ":1:8:"),
        (b"\xff\xfe name", ":1:1:"),
        (b"name: ok\ntopology:\n  nodes:\n    h1: {kind: \xc3}\n", ":4:"),
        (b"name: t\ntopology:\n  nodes: {{ range .x }}\n", ":3:"),
    ],
)
def test_refused_bytes_exit_2_with_their_line_and_make_nothing(tmp_path, content, where):
    path = tmp_path / "lab.yml"
    path.write_bytes(content)
    before, labs = root_links(), state.labs()
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and f"lab.yml{where}" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert root_links() == before and state.labs() == labs


EDITS = st.lists(mutation, min_size=1, max_size=4)
KATHARA = (
    b'r1[0]="A"\nr1[1]="B"\nr1[image]="kathara/frr"\nr1[mem]="256m"\nr1[cpus]="0.5"\n'
    b'h1[0]="A"\nh2[0]="B"\nh2[bridged]=true\nLAB_NAME="fz"\n'
)
STARTUP = b"ip address add 10.0.0.2/24 dev eth0\nip route add default via 10.0.0.1\n"


@FUZZ
@given(conf=EDITS, startup=st.one_of(st.none(), EDITS))
def test_mutated_kathara_labs_load_or_are_refused_cleanly(tmp_path_factory, conf, startup):
    folder = tmp_path_factory.mktemp("kathara")
    (folder / "lab.conf").write_bytes(mutate(KATHARA, conf))
    (folder / "h1.startup").write_bytes(mutate(STARTUP, startup) if startup else STARTUP)
    (folder / "lab.dep").write_bytes(mutate(b"h1: r1\nh2: r1 h1\n", startup) if startup else b"h1: r1\n")
    (folder / "r1" / "etc" / "frr").mkdir(parents=True)
    (folder / "r1" / "etc" / "frr" / "frr.conf").write_text("router ospf\n network 10.0.0.0/8 area 0\n")
    accepts_or_refuses(folder)


INVENTORY = b"servers:\n  s1: {address: 198.18.0.11}\n  s2: {address: 198.18.0.12, weight: 2, port: 2222}\nstitch: {port: 4789, vni: 100000, mtu: 1500}\n"


@FUZZ
@given(edits=EDITS)
def test_mutated_inventories_load_or_are_refused_cleanly(tmp_path_factory, edits):
    from nestlab.model.servers import load_inventory

    path = tmp_path_factory.mktemp("inv") / "servers.yml"
    path.write_bytes(mutate(INVENTORY, edits))
    try:
        load_inventory(path)
    except TopologyError as exc:
        event("refused")
        placed(exc)


API_NAMES = st.one_of(NAMES, st.text(max_size=8))


@FUZZ
@given(
    name=API_NAMES,
    nodes=st.lists(st.tuples(API_NAMES, st.sampled_from(["linux", "bridge", "ovs", "x"]), NODE), max_size=4),
    links=st.lists(
        st.tuples(
            st.lists(st.one_of(st.builds(lambda n, i: f"{n}:{i}", NAMES, IFACES), st.text(max_size=6)), min_size=1, max_size=3),
            st.dictionaries(st.sampled_from(["mtu", "mode", "vni", "parent", "params", "bogus"]), SCALAR, max_size=2),
        ),
        max_size=4,
    ),
)
def test_python_api_calls_build_or_are_refused_cleanly(name, nodes, links):
    """The Python API (Lab, add_node, add_link, plan) refuses bad arguments with our errors only."""
    try:
        lab = Lab(name)
        for node, kind, spec in nodes:
            lab.add_node(node, kind, **{k.replace("-", "_"): v for k, v in spec.items() if k != "kind"})
        for endpoints, options in links:
            lab.add_link(*endpoints, **options)
        lab.plan
    except (TopologyError, LabError):
        event("refused")
        return
    event("planned")


SHAPES = {
    "rate": ["10mbit", "1gbit", "0", "-5mbit", "x", "none", "99999999gbit", ""],
    "burst": ["64kb", "0", "x", "none"],
    "queue": [0, 1, 100, -1, 10**9],
    "delay": ["20ms", "none", "-1ms", "x"],
    "loss": ["10%", "200%", "x"],
    "jitter": ["5ms", "x"],
    "distribution": ["normal", "x"],
    "mtu": [68, 1500, 9000, 0, 70000, -1],
    "qdisc": ["htb", "tbf", "x"],
    "state": ["up", "down", "x"],
}


@FUZZ
@given(key=st.sampled_from(sorted(set(SHAPES) - {"mtu"})), value=st.data())
def test_link_set_checks_each_value_as_the_schema_does(key, value):
    """`nestlab link set` checks values without pydantic (model/shape_keys.py): it refuses exactly what the
    schema's LinkParams refuses, and says why."""
    from pydantic import ValidationError

    from nestlab.model import shape_keys
    from nestlab.model.schema.links import LinkParams

    given = value.draw(
        st.one_of(
            st.sampled_from(SHAPES[key]),
            st.text(max_size=8),
            st.from_regex(r"\A\s?-?[0-9]{1,12}(\.[0-9]{1,3})?\s?(k|m|g|t|kb|mb|us|ms|s|%|bit|mbit|gbit|Bps)?\s?\Z"),
        )
    )
    try:
        LinkParams.model_validate({key: given})
        schema_takes = True
    except ValidationError:
        schema_takes = False
    found = shape_keys.problems({key: given})
    assert (not found) == schema_takes, (key, given, found)
    assert all(message for _, message in found)
    event("taken" if schema_takes else "refused")


@pytest.fixture
def two_nodes(lab_from):
    """One running lab for all of a test's examples (Hypothesis calls the test once per example)."""
    return lab_from("name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n")


@FUZZ
@given(
    params=st.dictionaries(st.sampled_from(sorted(SHAPES)), st.none(), min_size=1, max_size=4).flatmap(
        lambda keys: st.fixed_dictionaries({k: st.one_of(st.sampled_from(SHAPES[k]), st.text(max_size=6)) for k in keys})
    ),
    direction=st.sampled_from(["both", "a", "b", "x"]),
)
def test_link_set_arguments_apply_or_are_refused_cleanly(two_nodes, params, direction):
    """``nestlab link set`` arguments on a running lab: applied, or refused with our errors only."""
    try:
        two_nodes.link("a:eth1", "b:eth1").set(direction=direction, **params)
        event("applied")
    except (TopologyError, LabError):
        event("refused")


@FUZZ
@given(
    tool=st.one_of(st.sampled_from(["iperf3", "sockperf", "ping"]), st.text(max_size=6)),
    duration=st.floats(allow_nan=True),
    parallel=st.integers(-5, 500),
    size=st.one_of(st.none(), st.integers(-10, 70000)),
    bitrate=st.one_of(st.none(), st.sampled_from(["500M", "1G", "10", "1.5k", "x", "-1M", ""]), st.text(max_size=5)),
    cpu=st.one_of(st.none(), st.integers(-2, 64)),
    fmt=st.sampled_from(["table", "json", "yaml"]),
)
def test_bench_run_options_are_taken_or_refused_before_anything_runs(tool, duration, parallel, size, bitrate, cpu, fmt):
    from nestlab.bench import tools

    try:
        tools.check_run(tool, duration, parallel, size, bitrate, cpu, fmt)
    except LabError:
        event("refused")
        return
    assert tool in ("iperf3", "sockperf", "ping") and 0 < duration <= 86400 and 1 <= parallel <= 128
    event("taken")


@pytest.fixture(scope="module")
def state_seed(tmp_path_factory):
    """A real state file: a small lab's, written by deploying it (and destroyed at once)."""
    path = tmp_path_factory.mktemp("state") / "lab.yml"
    path.write_text(
        "name: fzseed\ntopology:\n  nodes: {a: {}, sw: {kind: bridge}}\n  links:\n    - {endpoints: [a:eth1, sw:p1], params: {rate: 10mbit}}\n"
    )
    lab = Lab.from_file(path)
    with lab.deployed():
        with open(os.path.join(state.names.lab_dir("fzseed"), "state.json"), "rb") as fh:
            return fh.read()


@FUZZ
@given(edits=EDITS)
def test_damaged_state_files_are_refused_and_cleaned(state_seed, edits):
    """A state file damaged any way: reading it is a LabError pointing at cleanup (or a state), and
    cleanup removes the lab's folder whatever it holds."""
    from nestlab import sites
    from nestlab.engine import where

    folder = state.names.lab_dir("fzdamaged")
    os.makedirs(folder, exist_ok=True)
    try:
        with open(os.path.join(folder, "state.json"), "wb") as fh:
            fh.write(mutate(state_seed, edits))
        with open(os.path.join(folder, where.RECORD), "wb") as fh:
            fh.write(mutate(b'{"site": "ssh", "data": {"servers": {}, "base": "/", "placement": {}}}', edits))
        for read in (state.read, where.read):
            try:
                read("fzdamaged")
                event(f"{read.__module__}: read")
            except LabError as exc:
                assert "cleanup fzdamaged" in str(exc)
                event(f"{read.__module__}: refused")
    finally:
        with contextlib.suppress(LabError):
            sites.remove("fzdamaged")
    assert not os.path.exists(folder)
