"""The local machinery beneath the sites: what makes, records, starts, stops, inspects, watches and removes a lab's
namespaces on this machine (the Applier, below, makes its kernel objects from a diff of plans).

The local site (sites/local.py) is this package's user; the remote sites use its records (state.py, where.py)
for the part of a lab that is here.  Nothing here knows the Python API (nestlab/lab) or the sites."""
