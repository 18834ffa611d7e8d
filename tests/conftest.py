"""Shared fixtures. Every test runs against the real kernel as root, and nothing of ours may outlive it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import machine
import pytest

from nestlab import Lab
from nestlab.backends.kernel import cgroups, rtdump
from nestlab.engine import cleanup, state

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["serve_fixtures"]  # the one nestlab serve the serve tests share
NESTLAB = [sys.executable, "-m", "nestlab.cli.app"]


IN_VM = os.environ.get("NESTLAB_TEST_VM") == "1"


def pytest_configure(config):
    if os.geteuid() != 0:
        raise pytest.UsageError("nestlab's tests create namespaces and links: run them as root (make test)")


def pytest_collection_modifyitems(items):
    """``@pytest.mark.throughput``: a failure while the hypervisor starved the machine is rerun (up to 3 times)."""
    for item in items:
        if item.get_closest_marker("throughput"):
            item.add_marker(pytest.mark.flaky(reruns=3, only_rerun=[machine.MachineStarved]))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A throughput test's failing assertion becomes MachineStarved (rerun) only if the steal at that moment says so."""
    if pyfuncitem.get_closest_marker("throughput") is None:
        return (yield)
    before = machine.cpu_times()
    try:
        return (yield)
    except AssertionError as exc:
        stolen = machine.stolen_since(before)
        if stolen < machine.STARVED:
            raise
        STARVED_ATTEMPTS.append((pyfuncitem.nodeid, f"{stolen:.0%} stolen: {str(exc).splitlines()[0][:300]}"))
        raise machine.MachineStarved(f"the hypervisor took {stolen:.0%} of the CPU time while this ran: {exc}") from exc


STARVED_ATTEMPTS: list[tuple[str, str]] = []


def pytest_terminal_summary(terminalreporter):
    """Why each throughput test was rerun, so a CI log tells starvation from a real regression."""
    if STARVED_ATTEMPTS:
        terminalreporter.write_sep("=", "attempts that failed while the hypervisor starved the machine")
        for nodeid, why in STARVED_ATTEMPTS:
            terminalreporter.write_line(f"{nodeid}: {why}")


def pytest_runtest_setup(item):
    """``@pytest.mark.kernel("ipvlan", ...)``: skipped here if the kernel lacks it; must run in ``make test-vm``."""
    marker = item.get_closest_marker("kernel")
    if marker is None:
        return
    from nestlab.backends.kernel import probe

    missing = [name for name in marker.args if not _has(probe, name)]
    if not missing:
        return
    if IN_VM:
        pytest.fail(f"the test VM's kernel lacks {', '.join(missing)}; the VM tier must run this test")
    pytest.skip(f"this machine lacks {', '.join(missing)}; runs in `make test-vm` (Debian's stock kernel)")


def _has(probe, name: str) -> bool:
    if name == "cgroup2":
        return cgroups.version() == 2
    if name == "user-limits":  # the per-user namespace limits can be set (not in a container's user namespace)
        try:
            open("/proc/sys/user/max_net_namespaces", "r+").close()
            return True
        except PermissionError:
            return False
    if name == "ovs-kernel":
        from nestlab.backends.services import ovs

        return ovs.kernel_datapath_available()
    return probe.kernel()[name][0]


def leftovers() -> list[str]:
    """Everything on this machine that carries nestlab's marker."""
    found = [f"namespace {p}" for p in cleanup.marked_namespaces()]
    found += [f"state of lab {lab}" for lab in state.labs() if os.path.isdir(f"/run/nestlab/{lab}")]
    with open("/proc/self/mountinfo") as fh:
        found += [f"mount {line.split()[4]}" for line in fh if "/run/nestlab/" in line.split()[4]]
    found += [f"process {pid} ({cmd[:60]})" for pid, cmd in processes() if "/run/nestlab/" in cmd]
    found += [f"cgroup {path}" for paths in cgroups.lab_cgroups().values() for path in paths]
    found += [f"interface {name} of this machine" for name in rtdump.marked()]
    found += _management_leftovers()
    found += [f"lab directory {p}" for p in _lab_folders_in_checkout()]
    if os.environ.get("DOCKER_HOST"):  # set by the docker_engine fixture while its engine runs
        listed = subprocess.run(["docker", "ps", "-aq", "--filter", "label=nestlab.lab"], capture_output=True, text=True)
        found += [f"docker container {cid}" for cid in listed.stdout.split()]
    return found


def _management_leftovers() -> list[str]:
    """What a management network leaves when it goes wrong: names, leases, bridges, rules, keys."""
    import glob

    found = [f"netns name {p}" for p in glob.glob("/run/netns/clab-*")]
    found += [f"management leases {p}" for p in glob.glob("/run/nestlab-mgmt/*.json")]
    if not IN_VM:  # the VM sees this machine's /etc and /var, where the host tier's labs may be running
        found += [f"ssh config {p}" for p in glob.glob("/etc/ssh/ssh_config.d/clab-*.conf")]
        found += [f"lab keys {p}" for p in glob.glob("/var/lib/nestlab/ssh/*")]
        with open("/etc/hosts") as fh:
            found += [f"/etc/hosts line {line.strip()}" for line in fh if line.startswith("###### CLAB-")]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    found += [f"nftables {line.strip()}" for line in tables.splitlines() if "nestlab_mgmt_" in line]
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found += [f"interface {line.split(':')[1].strip()}" for line in listed.splitlines() if "alias nestlab-mgmt:" in line]
    return found


def _lab_folders_in_checkout() -> list[str]:
    """clab-LAB/ folders a deploy wrote beside a file of this checkout (destroy keeps them; tests must not)."""
    if not (ROOT / ".git").exists():  # an unpacked archive: what a deploy writes there
        return [str(p.parent) for p in ROOT.glob("**/clab-*/topology-data.json") if ".venv" not in p.parts]
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(ROOT), "ls-files", "-o", "-i", "--exclude-standard", "--directory"],
        capture_output=True,
        text=True,
    )
    if listed.returncode:
        raise RuntimeError(f"cannot list this checkout's ignored files: {listed.stderr}")
    return [p for p in listed.stdout.split() if os.path.basename(p.rstrip("/")).startswith("clab-")]


def processes():
    """(pid, command line) of every process on this machine."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    yield int(entry.name), fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Fail any test after which something marked remains (and remove it, so the next test starts clean)."""
    from nestlab import sites

    assert not leftovers(), f"objects left by an earlier test: {leftovers()}"
    yield
    left = leftovers()
    if left:
        for lab in set(state.labs()) | set(cgroups.lab_cgroups()):
            sites.remove(lab)
        pytest.fail(f"test left these behind: {left}")


@pytest.fixture
def lab_name() -> str:
    return "t" + uuid.uuid4().hex[:8]


@pytest.fixture
def topo_file(tmp_path, lab_name):
    """Write a topology (``{name}`` is replaced by a unique lab name) and destroy that lab afterwards."""
    from nestlab import sites

    made: list[str] = []

    def write(text: str, filename: str = "lab.yml") -> Path:
        path = tmp_path / filename
        path.write_text(text.replace("{name}", lab_name))
        made.append(lab_name)
        return path

    yield write
    for name in made:
        sites.remove(name)


@pytest.fixture
def lab_from(topo_file):
    """Deploy a topology text and return the running Lab; always destroyed afterwards."""
    labs: list[Lab] = []

    def deploy(text: str) -> Lab:
        lab = Lab.from_file(topo_file(text))
        labs.append(lab)
        lab.deploy()
        return lab

    yield deploy
    for lab in labs:
        lab.destroy()


# A guard against a hung CLI, not a bound on it: under the VM tier's software emulation the CLI's
# start-up alone (Python importing pydantic, pyroute2, typer) takes about 65 s against 0.8 s on the
# host, and a busy host slows the emulation further (a 120 s guard tripped on `inspect` there).
CLI_TIMEOUT = 900 if IN_VM else 120


def run_cli(*args: str, check: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*NESTLAB, *args], capture_output=True, text=True, timeout=timeout or CLI_TIMEOUT, check=check, cwd=ROOT
    )


def assert_every_cell_judged(folder: Path) -> dict:
    """A suite's results.json: every measured row and every cell carries a fidelity verdict (docs/fidelity.md)."""
    import json

    data = json.loads((folder / "results.json").read_text())
    levels = ("ok", "doubtful", "failed")
    assert data["cells"], "results.json has a summary per cell"
    for cell in data["cells"]:
        assert cell["fidelity"]["verdict"] in levels and cell["fidelity"]["measurements"], cell
        assert all(m["figures"]["cpus"] for m in cell["fidelity"]["measurements"]), cell
        assert all(len(f["ci95"]) == 2 for f in cell["figures"].values()), cell
    assert all(r["fidelity"] in levels for r in data["rows"] if not r.get("error")), "every measured row"
    page = (folder / "report.html").read_text()
    assert "id='fidelity'" in page and "<th>fidelity</th>" in page
    return data


def star(name: str, hosts: int, extra: str = "") -> str:
    """A lab ``name``: hosts h0.. on one bridge sw (``extra``: more node lines)."""
    nodes = "".join(f"    h{i}: {{}}\n" for i in range(hosts))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(hosts))
    return f"name: {name}\ntopology:\n  nodes:\n    sw: {{kind: bridge}}\n{nodes}{extra}  links:\n{links}"


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(": ")[1].split("@")[0] for line in out.splitlines()}
