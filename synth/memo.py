"""Bounded memos for the synthesizer's hot paths.

The search lowers, costs and compares the same few (type, mesh) and (collective, type,
mesh) values many times over, within one ``synthesize`` call and across calls. A
:class:`Memo` keeps what it made until it holds :data:`MAX_ENTRIES` values or
:data:`MAX_BYTES` bytes of arrays, then starts afresh (so memory stays bounded whatever
the meshes). Arrays it hands out are read-only: a caller that wrote one would corrupt
every later answer, so writing raises instead. An error is never memoised.
:func:`clear_all` empties them all.
"""

from __future__ import annotations

import numpy as np

#: Values one memo keeps before it starts afresh.
MAX_ENTRIES = 4096
#: Bytes of arrays one memo keeps before it starts afresh (64 MiB).
MAX_BYTES = 64 * 2**20


def _nbytes(v) -> int:
    if isinstance(v, np.ndarray):
        v.setflags(write=False)
        return v.nbytes
    if isinstance(v, tuple) and v and isinstance(v[0], np.ndarray):
        return sum(_nbytes(x) for x in v)
    return 0


#: Every memo made, so that :func:`clear_all` can empty them (``synth bench`` does before
#: each run: it measures cold calls, not these memos).
_ALL: list = []


def clear_all() -> None:
    """Empty every :class:`Memo` (values kept across ``synthesize`` calls)."""
    for m in _ALL:
        m.clear()


class Memo:
    """``memo.get(key, make)``: the value memoised for ``key``, or ``make()`` (then kept)."""

    __slots__ = ("name", "values", "nbytes")

    def __init__(self, name: str):
        self.name = name
        self.values: dict = {}
        self.nbytes = 0
        _ALL.append(self)

    def get(self, key, make):
        try:
            return self.values[key]
        except KeyError:
            pass
        v = make()
        n = _nbytes(v)
        if len(self.values) >= MAX_ENTRIES or self.nbytes + n > MAX_BYTES:
            self.clear()
        if n <= MAX_BYTES:
            self.values[key] = v
            self.nbytes += n
        return v

    def clear(self):
        self.values.clear()
        self.nbytes = 0

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"Memo({self.name!r})"
