"""The layer above the plug-ins: the Applier carries out a plan's changes through node kinds, link modes
and runtimes (nestlab/apply/applier.py)."""
