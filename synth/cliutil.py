"""What every command-line tool of the project shares: the argument parser, the case
arguments, and how a user error is reported.

One contract for all four CLIs (``synth``, ``simulator``, ``executor``, ``experiments``):

* a user error (:class:`synth.errors.RedistributionError`) prints **one line** on stderr,
  ``error: <message>``, and the tool exits with status 2, never a traceback;
* with ``--json`` anywhere on the command line the same error is also printed on stdout
  as one JSON object, ``{"error": "<message>", "kind": "<kind>"}``, so a script that
  parses stdout sees a document either way. ``kind`` is one of :data:`KINDS`;
* messages name the flag or file the user gave, never an internal function: a message
  that starts ``ArrayType.parse('[8{q}]'): ...`` is reported as ``type '[8{q}]': ...``;
* every tool that takes a redistribution accepts both spellings of a type: the canonical
  ``[1024{x}, 4096{y,z}]`` and JAX's ``P('x', ('y','z'))`` with ``--shape 1024,4096``, and
  ``--dtype bfloat16`` as well as ``--itemsize 2`` (they must agree when both are given).

Worked example::

    $ python -m synth plan --mesh x=2 --src "P('q')" --shape 8 --dst '[8]' --json
    {"error": "--src \\"P('q')\\": ... axis 'q' is not in the mesh ...", "kind": "type"}
    (stderr: error: --src ...)                                     exit status 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from synth.errors import (
    CollectiveError,
    MeshError,
    PlanError,
    RedistributionError,
    TypeSpecError,
)


class UsageError(RedistributionError):
    """A command line argparse refuses (unknown flag, missing value, bad choice)."""


class UserErrorParser(argparse.ArgumentParser):
    """argparse whose usage errors raise :class:`UsageError`, so every CLI reports them
    like any other user error: one line, status 2 (and JSON with ``--json``)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see --help)")


#: ``kind`` of the JSON error object, by the most specific class that matches.
KINDS = ("usage", "limit", "memory", "file", "schema", "mesh", "type", "collective", "plan", "profile",
         "placement", "input")


def error_kind(e: BaseException) -> str:
    """The ``kind`` field for ``e``: one of :data:`KINDS`."""
    from synth.fileio import FileError
    from synth.limits import LimitError

    k = getattr(e, "kind", None)
    if isinstance(k, str) and k in KINDS:
        return k
    for cls, name in ((UsageError, "usage"), (LimitError, "limit"), (FileError, "file"),
                      (MeshError, "mesh"), (TypeSpecError, "type"), (CollectiveError, "collective"),
                      (PlanError, "plan")):
        if isinstance(e, cls):
            return name
    return "input"


# ``ArrayType.parse('[8{q}]'): rest`` -> ``type '[8{q}]': rest``: the user typed a type,
# not a call. The argument is a Python repr (single or double quotes, backslash escapes).
_FNS = (r"ArrayType\.parse|ArrayType\.of|ArrayType\.from_spec|ArrayType|parse_type|parse_partition_spec|"
        r"Mesh\.parse|Mesh\.of|Mesh|synthesize|Plan\.from_dict|Schedule\.from_dict|ScheduleOp\.from_dict|"
        r"load_profile|with_scale")
_INTERNAL = re.compile(
    rf"\b(?P<fn>{_FNS})"
    r"\((?P<arg>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^()]*)\)")
# ``ArrayType.parse: dim 0 ...`` / ``Mesh.parse: empty ...`` -> ``type: ...`` / ``mesh: ...``
_INTERNAL_PREFIX = re.compile(rf"(?P<flag>--[\w-]+ )?\b(?P<fn>{_FNS}): ")
_WORD = {"ArrayType.parse": "type", "ArrayType.of": "type", "ArrayType.from_spec": "type", "ArrayType": "type",
         "parse_type": "type", "parse_partition_spec": "PartitionSpec", "Mesh.parse": "mesh", "Mesh.of": "mesh",
         "Mesh": "mesh", "synthesize": "plan", "Plan.from_dict": "plan JSON", "Schedule.from_dict": "schedule",
         "ScheduleOp.from_dict": "schedule op", "load_profile": "hardware", "with_scale": "what-if scale"}


def public_message(e: BaseException | str) -> str:
    """The user-facing one-line text of an error: internal call names replaced by what
    the user typed, newlines folded."""
    msg = str(e)

    def sub(m):
        arg = m.group("arg")
        return f"{_WORD[m.group('fn')]} {arg}" if arg else _WORD[m.group("fn")]

    msg = _INTERNAL.sub(sub, msg)
    msg = _INTERNAL_PREFIX.sub(lambda m: f"{m.group('flag').strip()}: " if m.group("flag")
                               else f"{_WORD[m.group('fn')]}: ", msg)
    msg = " ".join(part.strip() for part in msg.splitlines() if part.strip())
    return msg or type(e).__name__


def wants_json(argv) -> bool:
    argv = sys.argv[1:] if argv is None else argv
    return any(a == "--json" for a in argv if isinstance(a, str))


def report_error(e: BaseException, argv=None, kind: str | None = None) -> int:
    """Print ``e`` as the CLIs promise (one stderr line; one JSON object on stdout with
    ``--json``) and return the exit status, 2."""
    msg = public_message(e)
    print(f"error: {msg}", file=sys.stderr)
    if wants_json(argv):
        try:
            print(json.dumps({"error": msg, "kind": kind or error_kind(e)}))
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass
    return 2


def exit_main(main) -> None:
    """Run a CLI's ``main()`` and exit with its status, as every entry point of the project
    does (``python -m synth``, ``python -m executor.compiled``, ...). A reader that closes
    the pipe early (``python -m synth plan ... --json | head -c 100``) ends the command
    quietly with status 0 instead of a ``BrokenPipeError`` traceback: stdout is pointed at
    ``/dev/null`` so the interpreter's last flush cannot raise again. Ctrl-C prints one line
    and exits 130."""
    try:
        rc = main()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        rc = 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        rc = 130
    sys.exit(0 if rc is None else rc)


# -- the redistribution arguments, both spellings -------------------------------------------
#: Element types by name -> bytes per element (the executor's table; JAX's names).
DTYPE_ITEMSIZE = {
    "float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
    "int8": 1, "uint8": 1, "float64": 8, "int64": 8,
}


def add_case_args(p, *, mesh_default=None, src_default=None, dst_default=None, itemsize_default=None,
                  required=False) -> None:
    """``--mesh --src --dst --shape --itemsize --dtype`` as every CLI spells them."""
    from synth.limits import int_arg

    def d(v):
        return f" (default: {v})" if v is not None else ""

    p.add_argument("--mesh", default=mesh_default, required=required, help="mesh axes, e.g. x=4,y=2" + d(mesh_default))
    p.add_argument("--src", default=src_default, required=required,
                   help="source type: '[8{y}, 16, 8{x}]' or \"P('y', None, 'x')\" with --shape" + d(src_default))
    p.add_argument("--dst", default=dst_default, required=required, help="target type, same forms as --src" + d(dst_default))
    p.add_argument("--shape", default=None, help="global shape for P(...) forms, e.g. 8,16,8")
    p.add_argument("--itemsize", type=int_arg(1, "itemsize"), default=None,
                   help=f"bytes per element (default: {itemsize_default or 4}, or --dtype's)")
    p.add_argument("--dtype", default=None, help="element type instead of --itemsize: " + ", ".join(DTYPE_ITEMSIZE))


def parse_shape(text, what: str = "--shape") -> tuple[int, ...] | None:
    """``'8,16,8'`` (or ``8x16x8``) -> ``(8, 16, 8)``; None stays None."""
    from synth.limits import check_shape, parse_int

    if text is None:
        return None
    s = str(text).strip()
    if len(s) > 4096:
        raise RedistributionError(f"{what}: {len(s):,} characters; write sizes like 8,16,8")
    parts = [x.strip() for x in s.replace("x", ",").split(",")]
    if not s or any(not x for x in parts):
        raise RedistributionError(f"{what} {s[:60]!r}: write sizes like 8,16,8")
    shape = tuple(parse_int(x, what) for x in parts)
    if any(n < 1 for n in shape):
        raise RedistributionError(f"{what} {s[:60]!r}: every size must be >= 1")
    check_shape(shape, what)
    return shape


def resolve_itemsize(dtype, itemsize, default: int = 4) -> int:
    """Bytes per element from ``--dtype`` and/or ``--itemsize`` (they must agree)."""
    if dtype is None:
        return default if itemsize is None else itemsize
    if dtype not in DTYPE_ITEMSIZE:
        raise RedistributionError(f"--dtype {str(dtype)[:40]!r}: unknown; use one of {', '.join(DTYPE_ITEMSIZE)}")
    if itemsize is not None and itemsize != DTYPE_ITEMSIZE[dtype]:
        raise RedistributionError(f"--itemsize {itemsize} disagrees with --dtype {dtype} "
                                  f"({DTYPE_ITEMSIZE[dtype]} bytes); give one of them")
    return DTYPE_ITEMSIZE[dtype]


def _one_type(text, shape, flag):
    from synth.types import parse_type

    try:
        return parse_type(text, shape)
    except RedistributionError as e:
        raise type(e)(f"{flag} {public_message(e)}") from None


def parse_case(mesh, src, dst, shape=None):
    """``(Mesh, src type, dst type)`` from the command line's strings. ``P(...)`` forms
    take the shape from ``--shape`` or from the other type when it is canonical; errors
    name the flag (``--src '...': ...``)."""
    from synth.mesh import Mesh
    from synth.types import ArrayType

    try:
        m = Mesh.of(mesh)
    except RedistributionError as e:
        raise type(e)(f"--mesh {public_message(e)}") from None
    shp = parse_shape(shape) if isinstance(shape, str) else shape
    canon = [t for t in (src, dst) if isinstance(t, str) and t.strip().startswith("[")]
    if shp is None and canon:
        shp = _one_type(canon[0], None, "--src" if canon[0] is src else "--dst").shape
    s = _one_type(src, shp, "--src") if isinstance(src, str) else ArrayType.of(src)
    t = _one_type(dst, s.shape, "--dst") if isinstance(dst, str) else ArrayType.of(dst)
    if s.shape != t.shape:
        raise TypeSpecError(f"--src {s} and --dst {t} have different global shapes")
    s.check(m, "--src")
    t.check(m, "--dst")
    return m, s, t
