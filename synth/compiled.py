"""Compiled copies of the synthesizer's hot modules (Cython), used only while they match
their sources.

The search is pure Python; :func:`synth.build.build` compiles the modules of :data:`MODULES`, unchanged,
with Cython into ``synth/_compiled/`` (one extension a module, and ``manifest.json``:
each module's source hash at build time, the extension suffix and the Cython version).
Two modules carry declarations for their compiled copy only: ``synth/planners/moves.pxd``
makes ``Space`` an extension type with typed attributes, and ``@cython.locals(sp=Space)``
(Cython's pure-Python mode, a no-op in the ``.py``) types the ``sp`` of the functions that
read it, in ``moves.py`` and ``astar.py`` (``astar.pxd`` cimports the type).
:func:`install` (run by ``synth/__init__.py`` before any other submodule is imported) puts
a finder in front of ``sys.meta_path`` that loads a module's compiled copy **only when the
source hash (:func:`source_hash`: its ``.py`` and every ``.pxd``) equals the one it was
built from**; a module or declaration edited since, a copy
built for another Python, a missing or unreadable manifest, or ``SYNTH_PURE_PYTHON=1``
all give the ``.py`` as usual. So a stale build never runs, and the compiled and pure
modules compute the same plans (the same code: Cython keeps Python's integers, floats and
dict order; ``tests/test_synth_compiled.py`` compares plans, states and moves of both).

Invariants, stated once:

* the manifest is the only file the finder reads (a schema and a size cap:
  :data:`MAX_MANIFEST_BYTES`); a module's sources are hashed once, when it is imported;
* :func:`synth.build.build` writes only inside ``synth/_compiled/`` (a real folder, not a
  link: refused otherwise), each extension and the manifest by a rename onto its name;
* nothing here imports another module of ``synth`` at import time (it runs first).

Example::

    $ python -m synth.build                 # about 1 min on 2 cores; after an edit, --if-stale
    synth.build: 13 modules compiled (13 built, 0 up to date) in synth/_compiled
    $ python -m synth.build --status
    synth.build: 13 of 13 modules compiled and in use

:mod:`synth.build` compiles. ``make setup`` (so ``make run`` and ``make test``) runs
``python -m synth.build --if-stale``; without a C compiler or Cython, one line says so and
everything runs as pure Python, only slower.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

#: The modules compiled, each from its own ``.py`` (the search's hot loop and what a call
#: of :func:`synth.synthesize` runs every time).
MODULES = (
    "synth.planners.moves",
    "synth.planners.astar",
    "synth.planners.auto",
    "synth.planners.cost",
    "synth.planners.normal",
    "synth.types",
    "synth.collectives",
    "synth.plan",
    "synth.mesh",
    "synth.memo",
    "synth.limits",
    "synth.interp",
    "synth.schedule",
)

#: Set to 1 to ignore the compiled copies (read once, when :func:`install` runs).
ENV_PURE = "SYNTH_PURE_PYTHON"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024
#: Cython directives: keep Python's semantics exactly (annotations are not C types,
#: functions stay introspectable and patchable like Python functions).
DIRECTIVES = {"language_level": 3, "binding": True, "annotation_typing": False,
              "embedsignature": False}

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_PKG_DIR)
OUT_DIR = os.path.join(_PKG_DIR, "_compiled")


def source_path(name: str) -> str:
    """The ``.py`` file of module ``name`` (``synth.planners.moves`` ->
    ``<repo>/synth/planners/moves.py``)."""
    return os.path.join(_ROOT, *name.split(".")) + ".py"


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def pxd_paths() -> list[str]:
    """The Cython declaration files (``.pxd``) beside the modules of :data:`MODULES`, in
    the order of :data:`MODULES` (``synth/planners/moves.pxd`` declares ``Space`` as an
    extension type, which ``astar.pxd`` cimports)."""
    out = []
    for name in MODULES:
        p = source_path(name)[:-3] + ".pxd"
        if os.path.isfile(p):
            out.append(p)
    return out


def source_hash(name: str) -> str | None:
    """What a compiled copy of module ``name`` is checked against: the SHA-256 of its
    ``.py`` and of every ``.pxd`` of :func:`pxd_paths` (a declaration changes the C
    layout that other modules compiled against it read, so editing one makes every
    compiled copy stale until the next build). None when the ``.py`` cannot be read."""
    py = _sha256(source_path(name))
    if py is None:
        return None
    h = hashlib.sha256(py.encode())
    for p in pxd_paths():
        d = _sha256(p)
        h.update(f"\0{os.path.relpath(p, _ROOT)}\0{d}".encode())
    return h.hexdigest()


def _ext_suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def read_manifest(out_dir: str = OUT_DIR) -> dict | None:
    """The build's manifest, or None when it is absent, too large, or not of the schema
    ``{"ext_suffix": str, "cython": str, "modules": {name: {"sha256": str, "file": str}}}``."""
    p = os.path.join(out_dir, MANIFEST)
    try:
        if os.path.islink(p) or os.path.getsize(p) > MAX_MANIFEST_BYTES:
            return None
        with open(p, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict) or not isinstance(m.get("ext_suffix"), str) or \
            not isinstance(m.get("modules"), dict):
        return None
    for name, e in m["modules"].items():
        if not (isinstance(name, str) and isinstance(e, dict) and isinstance(e.get("sha256"), str)
                and isinstance(e.get("file"), str) and os.path.basename(e["file"]) == e["file"]):
            return None
    return m


class CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled copy of a module of the manifest whose source is unchanged
    (see the module doc); every other import falls through to the usual finders.

    ``why[name]`` says, for each module of the manifest asked for, which copy was used and
    why: ``compiled``, ``stale`` (the source changed since the build), ``missing`` (no
    extension file)."""

    def __init__(self, manifest: dict, out_dir: str = OUT_DIR):
        self.out_dir = out_dir
        ok = manifest.get("ext_suffix") == _ext_suffix()
        self.modules = dict(manifest["modules"]) if ok else {}
        self.why: dict[str, str] = {}

    def find_spec(self, fullname, path=None, target=None):
        e = self.modules.get(fullname)
        if e is None:
            return None
        so = os.path.join(self.out_dir, e["file"])
        if not os.path.isfile(so) or os.path.islink(so):
            self.why[fullname] = "missing"
            return None
        if source_hash(fullname) != e["sha256"]:
            self.why[fullname] = "stale"
            return None
        self.why[fullname] = "compiled"
        loader = importlib.machinery.ExtensionFileLoader(fullname, so)
        return importlib.util.spec_from_file_location(fullname, so, loader=loader)


_FINDER: CompiledFinder | None = None
_INSTALL_NOTE = "not installed"


def install() -> None:
    """Put :class:`CompiledFinder` in front of ``sys.meta_path`` (once; see the module doc)."""
    global _FINDER, _INSTALL_NOTE
    if _FINDER is not None or _INSTALL_NOTE != "not installed":
        return
    if os.environ.get(ENV_PURE, "") not in ("", "0"):
        _INSTALL_NOTE = f"{ENV_PURE}={os.environ[ENV_PURE]}"
        return
    m = read_manifest()
    if m is None:
        _INSTALL_NOTE = "not built (python -m synth.build)"
        return
    if m.get("ext_suffix") != _ext_suffix():
        _INSTALL_NOTE = f"built for {m.get('ext_suffix')}, this Python loads {_ext_suffix()}"
        return
    _FINDER = CompiledFinder(m)
    sys.meta_path.insert(0, _FINDER)
    _INSTALL_NOTE = "installed"


def is_compiled(module) -> bool:
    """Whether ``module`` (a module object) was loaded from a compiled extension."""
    f = getattr(module, "__file__", "") or ""
    return not f.endswith(".py") and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def status() -> dict:
    """Which of :data:`MODULES` run compiled in this process (each imported now), and why
    the others do not: ``{"mode", "note", "compiled": [...], "pure": {name: reason}}``."""
    import importlib

    compiled, pure = [], {}
    for name in MODULES:
        mod = importlib.import_module(name)
        if is_compiled(mod):
            compiled.append(name)
        else:
            why = _FINDER.why.get(name) if _FINDER is not None else None
            pure[name] = why or ("not in the build" if _FINDER is not None else _INSTALL_NOTE)
    mode = "compiled" if not pure else ("pure Python" if not compiled else "mixed")
    return {"mode": mode, "note": _INSTALL_NOTE, "compiled": compiled, "pure": pure,
            "modules": len(MODULES)}


def summary() -> str:
    """One line for benchmark output: how this process runs the synthesizer."""
    s = status()
    if s["mode"] == "compiled":
        return f"compiled (Cython): {len(s['compiled'])} of {s['modules']} modules"
    if s["mode"] == "pure Python":
        reasons = sorted(set(s["pure"].values()))
        return "pure Python: " + "; ".join(reasons)
    return (f"mixed: {len(s['compiled'])} of {s['modules']} modules compiled; pure: "
            + ", ".join(f"{k} ({v})" for k, v in sorted(s["pure"].items())))
