# Cython declarations for the compiled copy of astar.py (see moves.pxd): the engine's
# ``sp`` is typed as the Space extension type (its attributes read from the struct), and
# the work Budget is an extension type too (its counters are read and written at every
# expansion). Every field keeps Python's values (ints stay Python ints); subclasses (tests
# record probes) add their own slots.
from synth.planners.moves cimport Space


cdef class Budget:
    cdef public object limit
    cdef public object deadline
    cdef public object used
    cdef public object expanded
    cdef public object _clock_at
