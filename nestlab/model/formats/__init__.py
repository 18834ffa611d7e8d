"""Other tools' topology formats, read into nestlab's own: containerlab's files (clab.py) and the Go
templates they may be (gotemplate.py), and Kathará's lab folders (kathara.py).  They know only the
model's errors and positions; what they produce is checked by the model like any nestlab file."""
