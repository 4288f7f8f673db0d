# Cython declarations for the compiled copy of astar.py (see moves.pxd): the engine's
# ``sp`` is typed as the Space extension type, so its attributes are read from the struct.
from synth.planners.moves cimport Space
