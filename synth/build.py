"""Build the compiled copies of :data:`synth.compiled.MODULES` (Cython), and say which
copies run: ``python -m synth.build [--if-stale] [--jobs N] [--status] [--json]``.

See :mod:`synth.compiled` for what is compiled, where it goes and when a compiled copy is
used (only while it matches its source). A user error (no Cython, no C compiler, a bad
``--jobs``, an output folder that is a link) prints one line and exits 2.
"""

from __future__ import annotations

import json
import os
import sys

from synth.compiled import (
    _PKG_DIR,
    _ROOT,
    DIRECTIVES,
    MANIFEST,
    MODULES,
    OUT_DIR,
    _ext_suffix,
    read_manifest,
    source_hash,
    source_path,
    status,
    summary,
)
from synth.errors import RedistributionError

#: C compiler flags of every module. ``-O3`` (Python's own build flag): on the 2000 bench
#: cases the same plans, states and moves as ``-O2``, about 1-4% less CPU (two pairs run one
#: after the other on one core) and 1.6% fewer instructions over 100 median calls
#: (docs/synth.md, round 13). No flag that may change floating-point results
#: (``-ffast-math``, ``-march=native`` with its fused multiply-adds): the plans must not
#: depend on the machine that built them.
CFLAGS = ("-O3", "-g0")


def _check_out_dir(out_dir: str) -> None:
    if os.path.islink(out_dir) or (os.path.exists(out_dir) and not os.path.isdir(out_dir)):
        raise RedistributionError(f"synth.build: {out_dir} is a link or not a folder; "
                                  "remove it and build again")
    os.makedirs(out_dir, exist_ok=True)
    real = os.path.realpath(out_dir)
    if os.path.dirname(real) != os.path.realpath(_PKG_DIR):
        raise RedistributionError(f"synth.build: {out_dir} resolves outside synth/ ({real}); "
                                  "remove the link and build again")


def plan_build(out_dir: str = OUT_DIR, modules=MODULES) -> dict:
    """For each module: ``up to date`` (its compiled copy matches its source) or ``to
    build``, with its sources' hash (:func:`synth.compiled.source_hash`)."""
    m = read_manifest(out_dir) or {"modules": {}, "ext_suffix": None}
    # another Python, or other compiler flags (a build before they were recorded: -O2),
    # rebuilds every module
    same_py = m.get("ext_suffix") == _ext_suffix() and m.get("cflags") == list(CFLAGS)
    out = {}
    for name in modules:
        sha = source_hash(name)
        e = m["modules"].get(name)
        fresh = (same_py and e is not None and e["sha256"] == sha
                 and os.path.isfile(os.path.join(out_dir, e["file"])))
        out[name] = {"sha256": sha, "state": "up to date" if fresh else "to build"}
    return out


def build(out_dir: str = OUT_DIR, modules=MODULES, jobs: int | None = None, if_stale: bool = False,
          log=None) -> dict:
    """Compile ``modules`` with Cython into ``out_dir`` (see the module doc); with
    ``if_stale`` only those whose source changed since their build. Returns
    ``{"built": [...], "up_to_date": [...], "out_dir": ...}``. Raises
    :class:`synth.errors.RedistributionError` (one line) when Cython or a C compiler is
    missing or a module does not compile."""
    import shutil
    import tempfile
    import time

    jobs = (os.cpu_count() or 1) if jobs is None else int(jobs)
    _check_out_dir(out_dir)
    todo = plan_build(out_dir, modules)
    names = [n for n in modules if not (if_stale and todo[n]["state"] == "up to date")]
    result = {"built": [], "up_to_date": [n for n in modules if n not in names], "out_dir": out_dir}
    if not names:
        return result
    try:
        import Cython
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
    except ImportError as e:
        raise RedistributionError(f"synth.build: {e.name or e} is not installed; "
                                  "pip install cython setuptools (or run pure Python)") from None
    manifest = read_manifest(out_dir) or {"modules": {}}
    if manifest.get("ext_suffix") != _ext_suffix() or manifest.get("cflags") != list(CFLAGS):
        manifest = {"modules": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        # compiled from the sources in place (tracebacks name the real files and lines);
        # the hash recorded is checked again after the compile, so it is what was compiled
        shas = {n: source_hash(n) for n in names}
        exts = [Extension(n, [os.path.relpath(source_path(n), _ROOT)], extra_compile_args=list(CFLAGS))
                for n in names]
        if log:
            log(f"synth.build: compiling {len(names)} modules with Cython {Cython.__version__} "
                f"({jobs} jobs)")
        cwd = os.getcwd()
        try:
            os.chdir(_ROOT)
            exts = cythonize(exts, build_dir=os.path.join(tmp, "c"), compiler_directives=DIRECTIVES,
                             quiet=True, nthreads=jobs if jobs > 1 else 0)
            dist = Distribution({"ext_modules": exts, "script_name": "synth.compiled"})
            cmd = dist.get_command_obj("build_ext")
            cmd.build_lib = os.path.join(tmp, "lib")
            cmd.build_temp = os.path.join(tmp, "tmp")
            cmd.parallel = jobs if jobs > 1 else None
            cmd.ensure_finalized()
            dist.run_command("build_ext")
        except (Exception, SystemExit) as e:  # a compiler error: one line, no traceback
            first = str(e).splitlines()[0] if str(e) else ""
            raise RedistributionError(f"synth.build: the compile failed ({type(e).__name__}: "
                                      f"{first}); the modules run as pure Python") from None
        finally:
            os.chdir(cwd)
        for ext in exts:
            if source_hash(ext.name) != shas[ext.name]:
                continue  # edited while compiling: left for the next build (the .py runs)
            built = cmd.get_ext_fullpath(ext.name)
            fname = ext.name + _ext_suffix()
            final = os.path.join(out_dir, fname)
            part = final + ".part"
            shutil.copyfile(built, part)
            os.replace(part, final)
            manifest["modules"][ext.name] = {"sha256": shas[ext.name], "file": fname}
            result["built"].append(ext.name)
    manifest.update(ext_suffix=_ext_suffix(), cython=Cython.__version__,
                    python=sys.version.split()[0], cflags=list(CFLAGS))
    part = os.path.join(out_dir, MANIFEST + ".part")
    with open(part, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(part, os.path.join(out_dir, MANIFEST))
    result["seconds"] = time.perf_counter() - t0
    return result


def main(argv=None) -> int:
    from synth.cliutil import report_error

    try:
        return _main(argv)
    except RedistributionError as e:
        return report_error(e, argv if argv is not None else sys.argv[1:])


def _main(argv) -> int:
    from synth.cliutil import UserErrorParser

    p = UserErrorParser(prog="python -m synth.build",
                        description="Compile the synthesizer's hot modules with Cython into synth/_compiled "
                                    "(optional: the same plans, faster), or say which copies run.")
    p.add_argument("--if-stale", action="store_true", help="only modules whose source changed since their build")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: the CPU count)")
    p.add_argument("--status", action="store_true", help="build nothing; say which modules run compiled")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    a = p.parse_args(argv)
    if a.status:
        st = status()
        if a.json:
            print(json.dumps(st))
        else:
            print("synth.build: " + (f"{len(st['compiled'])} of {st['modules']} modules compiled and in use"
                                     if st["mode"] == "compiled" else summary()))
        return 0
    if a.jobs is not None and a.jobs < 1:
        raise RedistributionError(f"synth.build: --jobs {a.jobs} is not a positive count; give 1 or more")
    res = build(jobs=a.jobs, if_stale=a.if_stale,
                log=None if a.json else (lambda m: print(m, file=sys.stderr, flush=True)))
    if a.json:
        print(json.dumps(res))
    else:
        print(f"synth.build: {len(res['built']) + len(res['up_to_date'])} modules compiled "
              f"({len(res['built'])} built, {len(res['up_to_date'])} up to date) in "
              f"{os.path.relpath(res['out_dir'])}")
    return 0


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
