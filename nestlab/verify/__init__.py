"""Verify a lab: its ``checks:`` run and timed (checks.py), each kind probed by a module of its own (reach.py,
routing.py, command.py, measures.py; probing.py: what they share), the targets found through the lab's routes
(targets.py)."""
