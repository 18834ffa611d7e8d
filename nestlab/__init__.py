"""nestlab: networks of lightweight containers on one Linux machine, built, shaped and measured.

>>> from nestlab import Lab                       # doctest: +SKIP
>>> with Lab.from_file("examples/quickstart.yml").deployed() as lab:   # doctest: +SKIP
...     print(lab.nodes["h1"].cmd("ping -c1 " + lab.nodes["h2"].intf("eth1").ip))
"""

from .errors import LabError
from .lab.lab import Lab
from .lab.node import Interface, Node
from .model.errors import TopologyError

__version__ = "0.1.0"
__all__ = ["Interface", "Lab", "LabError", "Node", "TopologyError", "__version__"]
