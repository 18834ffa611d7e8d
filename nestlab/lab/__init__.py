"""The Python API: :class:`~nestlab.lab.lab.Lab` (build, deploy, inspect, destroy), its nodes
(:class:`~nestlab.lab.node.Node`), its links while it runs (:class:`~nestlab.lab.link_handle.LinkHandle`), its
``schedule:`` played (schedule.py) and how faithfully it ran (fidelity.py: a :class:`~nestlab.lab.fidelity.Watch`
and its verdict).  Kernel objects are made by a lab's site (nestlab/sites; on this machine, by the engine's deploy:
engine/deploy.py)."""
