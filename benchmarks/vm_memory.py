#!/usr/bin/env python3
"""How much of a big deploy is this VM's memory?  The same CLI deploy, with and without memory the host backs.

This VM hands the memory it frees back to its host (virtio free page reporting), and touching such
memory again costs a fault in the host.  A 10 000-node lab needs about 3.5 GiB of new kernel memory,
a 2 000-node lab 0.7 GiB.  Two conditions, interleaved, each deploy timed from the shell:

* ``as is``: the VM's own page-reporting settings;
* ``backed``: reporting held back (``max_waiting_mib``, the freed memory the VM may keep unreported,
  raised from 1 024 MiB to 32 GiB; ``min_free_ms``, how long memory stays free before it is reported,
  raised from 0 to 60 s) and 1.5 x ``--touch`` GiB (6) touched and freed just before the deploy, so the
  kernel's allocations find pages the host backs.

It also times the first touch of ``--touch`` GiB (4) from user space, cold and again at once.  The VM's
settings are put back at the end, even on an error.  It runs only where the kernel has those settings
(``/sys/module/page_reporting/parameters``); results are in docs/performance.md.

Usage (root):  python benchmarks/vm_memory.py [--sizes 2000,10000] [--rounds 3] [--touch 4]
"""

from __future__ import annotations

import argparse
import mmap
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from benchmarks.deploy_scale import _timed, meminfo, star_text  # noqa: E402

SETTINGS = Path("/sys/module/page_reporting/parameters")


def touch(gib: float) -> float:
    """Seconds to write one byte into each 4 KiB page of ``gib`` GiB of fresh anonymous memory (then freed)."""
    size = int(gib * (1 << 30))
    with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as area:
        start = time.perf_counter()
        for at in range(0, size, 4096):
            area[at] = 1
        return time.perf_counter() - start


def put(waiting_mib: int, free_ms: int) -> None:
    (SETTINGS / "max_waiting_mib").write_text(str(waiting_mib))
    (SETTINGS / "min_free_ms").write_text(str(free_ms))


def reported_mib() -> int:
    return int((SETTINGS / "reported_kib").read_text()) // 1024


def quiet(limit: float) -> None:
    """Until free memory stops rising: the kernel has finished tearing the last lab down."""
    last, still, start = meminfo()["MemFree"], 0, time.monotonic()
    while still < 4 and time.monotonic() - start < limit:
        time.sleep(1)
        now = meminfo()["MemFree"]
        still = still + 1 if abs(now - last) < 8000 else 0
        last = now


def deploy(n: int, backed: float, own: tuple[int, int], settle: float) -> tuple[float, int]:
    """Seconds of the CLI's deploy of a star of ``n`` and MiB the VM reported meanwhile, its memory ``backed`` (GiB
    touched first; 0: as is), after at most ``settle`` s waiting for the last teardown; destroys it after."""
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as fh:
        fh.write(star_text(n))
    try:
        quiet(settle)
        if backed:
            put(32768, 60_000)
            touch(backed)
        else:
            put(*own)
            time.sleep(5)
        before = reported_mib()
        took = _timed("deploy", "-t", fh.name)[0]
        reported = reported_mib() - before
        _timed("destroy", "--lab", f"shell-star{n}")
        return took, reported
    finally:
        os.unlink(fh.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--touch", type=float, default=4, help="GiB of the first-touch timing (1.5 x that backs a deploy)")
    parser.add_argument("--settle", type=float, default=90, help="at most this many seconds waiting for the last teardown")
    args = _smoke.parse(parser, sizes="10,20", rounds=1, touch=0.25, settle=2.0)
    if not (SETTINGS / "max_waiting_mib").exists():
        _smoke.skip(f"{SETTINGS}/max_waiting_mib: this kernel has no page-reporting settings to compare")
    sizes = [int(s) for s in args.sizes.split(",")]
    own = (int((SETTINGS / "max_waiting_mib").read_text()), int((SETTINGS / "min_free_ms").read_text()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that the settings are put back
    try:
        cold = touch(args.touch)
        print(f"first touch of {args.touch:g} GiB: {cold:.2f} s; again at once: {touch(args.touch):.2f} s\n")
        print(
            "| round | memory | "
            + " | ".join(f"{n} deploy" for n in sizes)
            + f" | {sizes[-1]} / {sizes[0]} | MiB reported meanwhile |"
        )
        print("|---|---|" + "---|" * len(sizes) + "---|---|")
        for round_ in range(1, args.rounds + 1):
            for backed in (0, 1.5 * args.touch):
                runs = [deploy(n, backed, own, args.settle) for n in sizes]
                cells = " | ".join(f"{took:.2f} s" for took, _ in runs)
                print(
                    f"| {round_} | {'backed' if backed else 'as is'} | {cells} | {runs[-1][0] / runs[0][0]:.2f} | "
                    + " / ".join(str(mib) for _, mib in runs)
                    + " |",
                    flush=True,
                )
    finally:
        put(*own)


if __name__ == "__main__":
    main()
