"""Verify a lab: its ``checks:`` run and timed (checks.py)."""
