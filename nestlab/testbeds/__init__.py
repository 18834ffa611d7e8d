"""Places to run labs, made on this machine: emulated SSH servers (emulate.py), a Kubernetes cluster
built from source (cluster.py: up and down; control_plane.py: its control node, certificates and kubeconfigs;
kubelets.py: its nodes) and the images its pods run (images.py).  They are tools for tests, demos and trying
labs, not the lab lifecycle: each is itself a nestlab lab."""
