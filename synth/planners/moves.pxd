# Cython declarations for the compiled copy of moves.py (synth.compiled; the .py runs
# unchanged without them). Space is an extension type there: the search reads its
# attributes millions of times, and a declared attribute is a field of the object's C struct
# (no lookup through the type); attributes declared as dict, list, tuple or frozenset also
# let Cython call those types' C functions (a dict's get, a list's item) on the locals
# that take them. Every attribute keeps Python's own values: ints stay Python ints, the
# three doubles are Python floats in the .py. An attribute assigned a value of another
# type raises TypeError in the compiled copy: tests/test_synth_compiled.py plans with both
# copies and compares. A change here rebuilds every compiled module (synth.compiled hashes
# each module with every .pxd of the package), since astar.pxd cimports this type.

cdef class Space:
    cdef public object mesh
    cdef public tuple shape
    cdef public object rank
    cdef public tuple names
    cdef public dict idx
    cdef public tuple sz
    cdef public tuple _bit
    cdef public tuple base_of
    cdef public dict nfactors
    cdef public tuple kept_unit
    cdef public object itemsize
    cdef public object cost
    cdef public object max_fused
    cdef public object max_ordered
    cdef public object local_free
    cdef public double floor
    cdef public object bytes_lb
    cdef public tuple S0
    cdef public tuple T
    cdef public frozenset TU
    cdef public object t_used
    cdef public dict _info
    cdef public dict _types
    cdef public dict _cost
    cdef public dict _class
    cdef public dict _goal_adj
    cdef public dict _pclass
    cdef public object closure_capped
    cdef public dict _h
    cdef public dict _hold
    cdef public dict _ov
    cdef public dict _succ
    cdef public object _cur
    cdef public object _coords
    cdef public dict _bidx
    cdef public object _bidx_elems
    cdef public dict _ids
    cdef public list states
    cdef public list shards
    cdef public list infos
    cdef public list _hv
    cdef public list _lr
    cdef public dict _nx
    cdef public object size
    cdef public object _exact
    cdef public dict _sub
    cdef public dict _prods
    cdef public dict _free_sizes
    cdef public dict _strides
    cdef public dict _hq
    cdef public dict _uov
    cdef public object _t_shard
    cdef public object _t_regions
    cdef public object _t_prefix_products
    cdef public object _even_T
    cdef public object relabel
    cdef public object tick
    cdef public object fast
    cdef public double _bw
    cdef public double _alpha
    cdef public list _hvs
