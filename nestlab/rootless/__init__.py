"""Labs without root (docs/rootless.md): an ordinary user's labs live in a user namespace of the user's own, held by
one small process per user (holder.py), in a view of the machine where nestlab's paths are the user's (view.py);
each command joins it before it runs and leaves it after (session.py)."""
