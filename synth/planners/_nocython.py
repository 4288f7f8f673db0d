"""What the planners take from Cython's pure-Python mode (``import cython``) where Cython
is not installed: the type declarations of the compiled copies (:mod:`synth.compiled`)
are no-ops for the ``.py`` that runs instead. Only what the planners use is here."""


def locals(**types):  # noqa: A001 - Cython's own name
    """``@cython.locals(sp=Space)``: types a function's locals when compiled; unchanged here."""
    def keep(fn):
        return fn

    return keep
