"""A node's view with a root of its own (a bind to a path the machine lacks) where a lab pod runs nestlab: under a
seccomp profile that refuses pivot_root as container runtimes' default profiles do (EPERM), which is what failed such
binds in lab pods.  No cluster needed: ``unshare`` makes the namespaces, the script installs the filter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

# In the pod's stead: seccomp refusing pivot_root (155 on x86-64) with EPERM, then a view binding a file to a path
# the machine lacks, entered by a child as every way into a node enters it; prints what the child reads there.
POD = r"""
import ctypes, os, struct, sys
from nestlab.backends.kernel import libc as nlibc, views
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
prog = [(BPF_LD_W_ABS, 0, 0, 0), (BPF_JEQ_K, 0, 1, 155), (BPF_RET_K, 0, 0, 0x00050000 | 1), (BPF_RET_K, 0, 0, 0x7FFF0000)]
buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.byref(Fprog(len(prog), ctypes.addressof(buf))), 0, 0) == 0
assert libc.syscall(155, b"/", b"/") != 0 and ctypes.get_errno() == 1, "pivot_root refused with EPERM, as in a pod"
work = sys.argv[1]
views.prepare(f"{work}/mnt")
views.create(f"{work}/mnt/v", "/proc/self/ns/net", "/proc/self/ns/uts", [(f"{work}/src", sys.argv[2], True)], {})
pid = os.fork()
if pid == 0:
    nlibc.setns(os.open(f"{work}/mnt/v", os.O_RDONLY), 0x20000)
    print(open(sys.argv[2]).read(), end="", flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux unshare")
def test_a_bind_to_a_path_the_machine_lacks_works_where_pivot_root_is_refused(tmp_path):
    target = "/etc/nestlab-pod-test/app.conf"
    assert not os.path.exists(os.path.dirname(target))
    (tmp_path / "mnt").mkdir()
    (tmp_path / "src").write_text("bound in the pod\n")
    done = subprocess.run(
        ["unshare", "-m", "-n", "-u", sys.executable, "-c", POD, str(tmp_path), target],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "bound in the pod\n", done.stdout + done.stderr[-2000:]
    assert not os.path.exists(os.path.dirname(target)), "nothing reaches the machine"
