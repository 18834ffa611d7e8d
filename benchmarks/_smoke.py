"""``--smoke``, which every script here takes: its smallest run (a few nodes, one round, a second of traffic), to
check that the script still works (``make test`` runs each: tests/test_benchmarks.py).  Its figures mean nothing;
the sizes the docs quote are each script's defaults."""

from __future__ import annotations

import argparse
import sys

SKIPPED = 77  # the exit status of a script whose machine lacks what it measures (the suite skips it, saying why)


def parse(parser: argparse.ArgumentParser, **smallest: object) -> argparse.Namespace:
    """``parser``'s arguments, with ``smallest`` (option name -> value) in place of what was given under ``--smoke``."""
    said = ", ".join(f"--{key.replace('_', '-')}" + ("" if value is True else f" {value}") for key, value in smallest.items())
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run, to check the script works ({said})")
    args = parser.parse_args()
    if args.smoke:
        for key, value in smallest.items():
            setattr(args, key, value)
    return args


def skip(why: str) -> None:
    """Stop: this machine lacks what the script measures."""
    print(why, file=sys.stderr)
    sys.exit(SKIPPED)
