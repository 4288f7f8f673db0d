"""Hostile-input corpus: every CLI, the Python API and the app, fed what a careless user
or an attacker would type.

Each case either fails as the project promises -- exit status 2 with exactly one line on
stderr, no traceback (for the API: a ``RedistributionError`` with a one-line message; for
the app: no exception and an error shown) -- or is a documented success. No case may
run away (10 s of CPU per case: a loop that never ends) or hang (60 s of wall time, the
issue's definition: a wait that never ends), and the corpus may not use more than 2 GB of
memory. The CPU budget, not the wall clock, catches runaway work, so the verdicts do not
depend on how loaded the machine is (a 2-core host at load average 15 took 13 s of wall
time for `synth bench --cases 1`, which uses 1.9 s of CPU).

Most cases run in one child process (``python tests/test_hostile.py --worker OUT``), which
calls each CLI's ``main(argv)`` with captured output, so that the corpus takes well under
a few minutes and its peak memory is measured apart from the rest of the test session. A
sample runs as real subprocesses (``python -m ...``, 80 s timeout each: the hang limit
plus an interpreter's and JAX's start-up on a loaded host).

``python tests/test_hostile.py --summary`` prints the counts by class.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HANG_S = 60.0  # wall seconds: a wait that never ends (the "hangs (> 60 s)")
RUNAWAY_CPU_S = 10.0  # CPU seconds of the worker (all its threads): work that never ends
MEMORY_LIMIT_BYTES = 2 * 10**9  # 2 GB
DIGITS_5000 = "9" * 5000
BIG = "1" + "0" * 30  # 10**30

# -- the corpus ------------------------------------------------------------------------------
# A case: (id, class, surface, target, expect[, match])
#   surface: synth | simulator | executor | experiments (main(argv) in the worker),
#            api (a callable), app (a callable on an AppTest), subprocess (argv of python -m)
#   expect:  "error" (exit 2 + one line / RedistributionError / st.error) or "ok"
#   match:   a substring the error line must contain (optional)
CASES: list[tuple] = []


def case(cid, cls, surface, target, expect="error", match=None):
    CASES.append((cid, cls, surface, target, expect, match))


# ---- synth CLI ----
PLAN = ["plan"]
MESHES_BAD = {
    "empty": ("", "syntax"), "noeq": ("x", "syntax"), "nosize": ("x=", "syntax"), "zero": ("x=0", "syntax"),
    "neg": ("x=-1", "syntax"), "float": ("x=1.5", "syntax"), "exp": ("x=1e3", "syntax"),
    "dup": ("x=2,x=2", "syntax"), "numname": ("1=2", "syntax"), "newline": ("x\n=2", "syntax"),
    "semicolon": ("x=2;y=4", "syntax"), "doublecomma": ("x=2,,y=4", "syntax"), "space": (" ", "syntax"),
    "1e9": ("x=1000000000", "caps"), "65537": ("x=65537", "caps"), "2^20": ("x=1024,y=1024", "caps"),
    "10^30": (f"x={BIG}", "big-number"), "5000digits": (f"x={DIGITS_5000}", "big-number"),
    "17axes": (",".join(f"a{i}=1" for i in range(17)), "caps"),
    "unicode_name": ("é=2,y=4", "syntax"), "nul": ("x=2\x00", "syntax"),
}
for k, (m, cls) in MESHES_BAD.items():
    case(f"synth-plan-mesh-{k}", cls, "synth", PLAN + ["--mesh", m])
TYPES_BAD = {
    "empty": ("", "syntax"), "brackets": ("[]", "syntax"), "unclosed": ("[1024{y}", "syntax"),
    "nobrackets": ("1024", "syntax"), "zero": ("[0]", "syntax"), "neg": ("[-8]", "syntax"),
    "exp": ("[1e30]", "big-number"), "10^30": (f"[{BIG}{{y}}, 512, 256{{x}}]", "big-number"),
    "5000digits": (f"[{DIGITS_5000}]", "big-number"), "rank1000": ("[" + ", ".join(["2"] * 1000) + "]", "caps"),
    "rank33": ("[" + ", ".join(["1"] * 33) + "]", "caps"), "elements": ("[100000000000, 100000000000]", "caps"),
    "unknownaxis": ("[1024{q}, 512, 256]", "syntax"), "axistwice": ("[1024{x,x}, 512, 256]", "syntax"),
    "axis2dims": ("[1024{x}, 512{x}, 256]", "syntax"), "nested": ("[1024{{x}}, 512, 256]", "syntax"),
    "badbrace": ("[1024}, 512, 256]", "syntax"), "pspec_noshape": ("P('x', None)", "syntax"),
    "pspec_code": ("__import__('os').system('true')", "syntax"), "shape_mismatch": ("[1024{y}, 512]", "syntax"),
    "float": ("[10.5, 512, 256]", "syntax"), "deep": ("[" * 5000 + "]" * 5000, "syntax"),
    "emptyaxis": ("[1024{x,}, 512, 256]", "syntax"), "unreduced_bad": ("[1024, 512, 256]{U:q}", "syntax"),
}
for k, (t, cls) in TYPES_BAD.items():
    if k == "pspec_noshape":  # synth plan takes the shape from a canonical --dst (as the executor does)
        case("synth-plan-src-pspec-shape-from-dst", "success", "synth", PLAN + ["--src", t, "--json"], "ok")
        continue
    case(f"synth-plan-src-{k}", cls, "synth", PLAN + ["--src", t])
for k in ("empty", "unclosed", "10^30", "rank1000", "unknownaxis", "elements"):
    case(f"synth-plan-dst-{k}", TYPES_BAD[k][1], "synth", PLAN + ["--dst", TYPES_BAD[k][0]])
for k, v, cls in (("0", "0", "silent"), ("neg", "-1", "syntax"), ("exp", "1e30", "big-number"),
                  ("10^30", BIG, "big-number"), ("65", "65", "caps"), ("abc", "abc", "syntax"),
                  ("5000digits", DIGITS_5000, "big-number"), ("empty", "", "syntax"), ("float", "4.0", "syntax")):
    case(f"synth-plan-itemsize-{k}", cls, "synth", PLAN + ["--itemsize", v])
case("synth-plan-planner-bogus", "syntax", "synth", PLAN + ["--planner", "bogus"])
for k, v in (("0", "0"), ("neg", "-1"), ("inf", "inf"), ("nan", "nan"), ("abc", "abc")):
    case(f"synth-plan-budget-ms-{k}", "silent" if k in ("0", "inf", "nan") else "syntax", "synth",
         PLAN + ["--budget-ms", v])
case("synth-plan-unknown-flag", "syntax", "synth", PLAN + ["--bogus"])
case("synth-no-command", "syntax", "synth", [])
case("synth-bad-command", "syntax", "synth", ["explode"])
for k, v, cls in (("0", "0", "silent"), ("neg", "-1", "syntax"), ("exp", "1e30", "caps"),
                  ("10^30", BIG, "caps"), ("over", "100001", "caps"), ("abc", "abc", "syntax")):
    case(f"synth-bench-cases-{k}", cls, "synth", ["bench", "--cases", v])
for k, v in (("neg", "-1"), ("10^40", "1" + "0" * 40), ("abc", "abc")):
    case(f"synth-bench-seed-{k}", "big-number" if k == "10^40" else "syntax", "synth",
         ["bench", "--cases", "1", "--seed", v])
case("synth-plan-default", "success", "synth", PLAN, "ok")
case("synth-plan-json", "success", "synth", PLAN + ["--json"], "ok")
case("synth-plan-65536-devices", "success", "synth",
     PLAN + ["--mesh", "x=256,y=256", "--src", "[65536{x}, 65536{y}]", "--dst", "[65536{y}, 65536{x}]"], "ok")
case("synth-plan-itemsize-64", "success", "synth", PLAN + ["--itemsize", "64"], "ok")
case("synth-bench-1", "success", "synth", ["bench", "--cases", "1", "--json"], "ok")
case("synth-help", "success", "synth", ["--help"], "ok")

# ---- simulator CLI ----
RUN = ["run"]
for k, v, cls in (("empty", "", "syntax"), ("unknown", "nope", "syntax"), ("zero", "cpu-host:0", "syntax"),
                  ("100000", "cpu-host:100000", "caps"), ("1e9", "cpu-host:1000000000", "caps"),
                  ("neg", "cpu-host:-1", "syntax"), ("torus-rank", "tpu-v4:4x4", "syntax"),
                  ("torus-huge", f"tpu-v4:{BIG}x4x4", "big-number"), ("exp", "cpu-host:1e9", "syntax"),
                  ("folder", "{tmp}", "files"), ("nonutf8", "{tmp}/nonutf8.yaml", "files"),
                  ("list", "{tmp}/list.yaml", "files"), ("passwd", "/etc/passwd", "files"),
                  ("devzero", "/dev/zero", "files"), ("gpu-zero", "dgx-h100:0", "syntax"),
                  ("colon", ":::", "syntax"), ("5000digits", f"cpu-host:{DIGITS_5000}", "big-number")):
    case(f"sim-run-hardware-{k}", cls, "simulator", RUN + ["--hardware", v])
for flag in ("--bandwidth-scale", "--latency-scale"):
    for k, v in (("inf", "inf"), ("-inf", "-inf"), ("nan", "nan"), ("neg", "-1"), ("huge", "1e308"),
                 ("abc", "abc"), ("10^400", "1e400")):
        case(f"sim-run{flag}-{k}", "silent" if k in ("inf", "nan", "10^400") else "syntax", "simulator",
             RUN + [flag, v])
case("sim-run--bandwidth-scale-0", "silent", "simulator", RUN + ["--bandwidth-scale", "0"])
# documented successes run on a small machine, so that they stay fast
SMALL_RUN = RUN + ["--hardware", "cpu-host:8", "--mesh", "x=8", "--src", "[64{x}]", "--dst", "[64]"]
case("sim-run--latency-scale-0", "success", "simulator", SMALL_RUN + ["--latency-scale", "0"], "ok")
for k, v in (("0", "0"), ("neg", "-1"), ("1e9", "1000000000"), ("abc", "abc")):
    case(f"sim-run-max-chunks-{k}", "caps" if k == "1e9" else "syntax", "simulator", RUN + ["--max-chunks", v])
for k in ("1e9", "10^30", "5000digits", "17axes", "newline"):
    case(f"sim-run-mesh-{k}", MESHES_BAD[k][1], "simulator", RUN + ["--mesh", MESHES_BAD[k][0]])
for k in ("10^30", "rank1000", "elements", "deep", "pspec_code"):
    case(f"sim-run-src-{k}", TYPES_BAD[k][1], "simulator", RUN + ["--src", TYPES_BAD[k][0]])
for k, v in (("10^30", BIG), ("65", "65"), ("0", "0")):
    case(f"sim-run-itemsize-{k}", "caps" if k != "0" else "silent", "simulator", RUN + ["--itemsize", v])
SCHED = {
    "missing": "{tmp}/nope.json", "folder": "{tmp}", "devzero": "/dev/zero", "nonutf8": "{tmp}/nonutf8.json",
    "badjson": "{tmp}/bad.json", "list": "{tmp}/list.json", "negbytes": "{tmp}/s-negbytes.json",
    "floatid": "{tmp}/s-floatid.json", "repeated": "{tmp}/s-repeated.json", "outside": "{tmp}/s-outside.json",
    "hugedevices": "{tmp}/s-hugedevices.json", "zerodevices": "{tmp}/s-zerodevices.json",
    "noops": "{tmp}/s-noops.json", "badkind": "{tmp}/s-badkind.json", "opsnotlist": "{tmp}/s-opsnotlist.json",
    "bytes1e30": "{tmp}/s-bytes1e30.json", "deepjson": "{tmp}/deep.json", "emptygroup": "{tmp}/s-emptygroup.json",
    "permutegroups": "{tmp}/s-permutegroups.json", "twogroups": "{tmp}/s-twogroups.json",
    "boolbytes": "{tmp}/s-boolbytes.json", "strbytes": "{tmp}/s-strbytes.json", "empty": "{tmp}/empty.json",
}
for k, f in SCHED.items():
    case(f"sim-run-schedule-{k}", "files" if k in ("missing", "folder", "devzero", "nonutf8", "badjson",
                                                    "deepjson", "empty") else "schedule-schema",
         "simulator", RUN + ["--hardware", "cpu-host:8", "--schedule", f])
case("sim-run-schedule-ok", "success", "simulator", RUN + ["--hardware", "cpu-host:2", "--schedule",
                                                           "{tmp}/s-ok.json", "--json"], "ok")
case("sim-run-schedule-and-src", "syntax", "simulator",
     RUN + ["--hardware", "cpu-host:8", "--schedule", "{tmp}/s-ok.json", "--src", "[8{x}]"])
for k, v in (("folder", "{tmp}"), ("missingparent", "{tmp}/no/such/t.csv"), ("devfull", "/dev/full"),
             ("devnull", "/dev/null"), ("proc", "/proc/t.csv"), ("empty", "")):
    case(f"sim-run-trace-{k}", "files", "simulator", RUN + ["--trace", v])
case("sim-run-trace-ok", "success", "simulator", SMALL_RUN + ["--trace", "{tmp}/out/t.csv"], "ok")
for k, v in (("bogus", "bogus"), ("devices-dup", "devices:1,1,1,1,1,1,1,1"), ("devices-short", "devices:0,1"),
             ("devices-huge", "devices:" + ",".join(map(str, range(100000)))), ("devices-neg", "devices:-1"),
             ("axes-bad", "x=Q"), ("10^30", f"devices:{BIG}")):
    case(f"sim-run-placement-{k}", "syntax", "simulator",
         RUN + ["--hardware", "cpu-host:8", "--mesh", "x=8", "--src", "[8{x}]", "--dst", "[8]", "--placement", v])
for k, v in (("empty", ""), ("abc", "abc"), ("exp", "1e30"), ("unknown", "99999"), ("mixed", "64,abc"),
             ("10^30", BIG)):
    case(f"sim-bench-sizes-{k}", "syntax", "simulator", ["bench", "--sizes", v])
case("sim-profiles", "success", "simulator", ["profiles", "--json"], "ok")
case("sim-run-small", "success", "simulator", SMALL_RUN + ["--json"], "ok")
case("sim-no-command", "syntax", "simulator", [])
case("sim-run-engine-bogus", "syntax", "simulator", RUN + ["--engine", "bogus"])

# ---- executor CLI (every case fails before JAX starts, or does not start it) ----
CG = ["codegen", "--mesh", "x=4,y=2", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]"]
XS = ["xla-schedule", "--mesh", "x=4,y=2", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]"]
CMP = ["compare", "--mesh", "x=4,y=2", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]"]
for k in ("1e9", "10^30", "5000digits", "17axes", "zero", "nul"):
    case(f"exec-codegen-mesh-{k}", MESHES_BAD[k][1], "executor",
         ["codegen", "--mesh", MESHES_BAD[k][0], "--src", "[8]", "--dst", "[8]"])
for k in ("10^30", "5000digits", "rank1000", "elements", "pspec_code", "deep", "unknownaxis"):
    case(f"exec-codegen-src-{k}", TYPES_BAD[k][1], "executor",
         ["codegen", "--mesh", "x=4,y=2", "--src", TYPES_BAD[k][0], "--dst", "[8, 16{x,y}, 8]"])
for k, v in (("exp", "1e30"), ("10^30", f"{BIG},8"), ("5000digits", DIGITS_5000), ("neg", "-8,16,8"),
             ("abc", "a,b"), ("empty", ""), ("commas", "8,,8")):
    case(f"exec-codegen-shape-{k}", "big-number" if k in ("10^30", "5000digits", "exp") else "syntax", "executor",
         ["codegen", "--mesh", "x=4,y=2", "--src", "P('y', None, 'x')", "--dst", "P(None, ('x','y'), None)",
          "--shape", v])
for k, v in (("0", "0"), ("10^30", BIG), ("65", "65"), ("abc", "abc")):
    case(f"exec-codegen-itemsize-{k}", "caps" if k in ("10^30", "65") else "syntax", "executor",
         CG + ["--itemsize", v])
for k, v in (("folder", "{tmp}"), ("missingparent", "{tmp}/no/such/g.py"), ("devfull", "/dev/full"),
             ("proc", "/proc/g.py")):
    case(f"exec-codegen-out-{k}", "files", "executor", CG + ["--out", v])
case("exec-codegen-out-ok", "success", "executor", CG + ["--out", "{tmp}/out/g.py"], "ok")
case("exec-codegen-planner-bogus", "syntax", "executor", CG + ["--planner", "bogus"])
for k, v in (("0", "0"), ("neg", "-1"), ("100000", "100000"), ("10^30", BIG), ("abc", "abc")):
    case(f"exec-xla-schedule-devices-{k}", "caps" if k in ("100000", "10^30") else "syntax", "executor",
         XS + ["--devices", v])
case("exec-xla-schedule-mesh-100000", "caps", "executor",
     ["xla-schedule", "--mesh", "x=100000", "--src", "[100000{x}]", "--dst", "[100000]"])
for k, v in (("folder", "{tmp}"), ("missingparent", "{tmp}/no/such/s.json"), ("devfull", "/dev/full")):
    case(f"exec-xla-schedule-out-{k}", "files", "executor", XS + ["--out", v])
for k, v, cls in (("1", "1", "silent"), ("0", "0", "silent"), ("10^30", BIG, "caps"), ("abc", "abc", "syntax")):
    case(f"exec-compare-repeats-{k}", cls, "executor", CMP + ["--repeats", v])
case("exec-compare-warmup-neg", "syntax", "executor", CMP + ["--warmup", "-1"])
for k, v, cls in (("0", "0", "silent"), ("neg", "-1", "silent"), ("10^30", BIG, "caps"), ("abc", "abc", "syntax"),
                  ("nondivisor", "3", "syntax")):
    case(f"exec-compare-processes-{k}", cls, "executor", CMP + ["--processes", v])
for k, v in (("0", "0"), ("huge", "99999999"), ("alone", "5000")):
    case(f"exec-compare-port-{k}", "syntax", "executor", CMP + ["--port", v])
for k, v, cls in (("unknown", "nope", "syntax"), ("empty", "", "syntax"), ("10^30", f"tpu-v4:{BIG}x4x4", "big-number"),
                  ("too-big", "tpu-v5p:64x64x64", "caps"), ("mismatch", "tpu-v4:16x16x16", "syntax"),
                  ("cpu", "cpu-host:8", "syntax")):
    case(f"exec-xla-schedule-target-{k}", cls, "executor", XS + ["--target", v])
case("exec-xla-schedule-memory", "caps", "executor",
     ["xla-schedule", "--check", "--mesh", "x=8", "--src", "[8{x}, 4294967296]", "--dst", "[8, 4294967296{x}]"],
     "error",
     "memory")
case("exec-xla-schedule-placement-no-target", "syntax", "executor", XS + ["--placement", "x=X"])
case("exec-compare-memory", "caps", "executor",
     ["compare", "--mesh", "x=8", "--src", "[8{x}, 4294967296]", "--dst", "[8, 4294967296{x}]"])
for k, v, cls in (("0", "0", "silent"), ("neg", "-1", "silent"), ("exp", "1e30", "caps"), ("10^30", BIG, "caps")):
    case(f"exec-report-cases-{k}", cls, "executor", ["report", "--cases", v])
for k, v in (("0", "0"), ("neg", "-3"), ("huge", "1048576")):
    case(f"exec-report-scale-{k}", "silent" if k != "huge" else "caps", "executor", ["report", "--scale", v])
case("exec-report-repeats-1", "silent", "executor", ["report", "--repeats", "1"])
for k, v in (("folder", "{tmp}"), ("missing", "{tmp}/nope.json"), ("nonutf8", "{tmp}/nonutf8.json"),
             ("badjson", "{tmp}/bad.json"), ("list", "{tmp}/list.json"), ("devzero", "/dev/zero")):
    case(f"exec-report-calibration-{k}", "files" if k != "folder" else "silent", "executor",
         ["report", "--calibration", v])
for k, v in (("folder", "{tmp}"), ("devfull", "/dev/full"), ("proc", "/proc/x/cal.json"), ("empty", "")):
    case(f"exec-calibrate-out-{k}", "files", "executor", ["calibrate", "--out", v])
case("exec-calibrate-no-out", "syntax", "executor", ["calibrate"])
case("exec-no-command", "syntax", "executor", [])
case("exec-help", "success", "executor", ["--help"], "ok")

# ---- experiments CLI ----
CONFIGS = {
    # name: (yaml text, class, match)
    "count-1e30": ("suites: [{random: {count: 1e30}}]", "caps", "count"),
    "count-1.0e30": ("suites: [{random: {count: 1.0e+30}}]", "caps", "count"),
    "count-1e8": ("suites: [{random: {count: 100000000}}]", "caps", "count"),
    "count-neg": ("suites: [{random: {count: -1}}]", "config-schema", "count"),
    "count-str": ("suites: [{random: {count: many}}]", "config-schema", "count"),
    "maxdev-1e9": ("suites: [{random: {count: 2, max_devices: 1000000000}}]", "caps", "max_devices"),
    "seed-float": ("suites: [{random: {count: 2, seed: 0.5}}]", "config-schema", "seed"),
    "names-int": ("suites: [{transformer: {names: 3}}]", "config-schema", "names"),
    "suite-unknown": ("suites: [nope]", "config-schema", "unknown suite"),
    "suite-param-unknown": ("suites: [{transformer: {speed: 3}}]", "config-schema", "speed"),
    "suite-two-names": ("suites: [{transformer: {}, random: {}}]", "config-schema", "one name"),
    "suite-params-int": ("suites: [{transformer: 3}]", "config-schema", "transformer"),
    "suites-mapping": ("suites: {a: 1}", "config-schema", "suites"),
    "measure-max-devices-str": ("suites: [transformer]\nmeasure: {max_devices: x}", "config-schema", "max_devices"),
    "measure-max-devices-float": ("suites: [transformer]\nmeasure: {max_devices: 1.5}", "config-schema", "max_devices"),
    "measure-list": ("suites: [transformer]\nmeasure: [1, 2]", "config-schema", "measure"),
    "measure-unknown": ("suites: [transformer]\nmeasure: {bogus: 1}", "config-schema", "bogus"),
    "measure-enabled-str": ("suites: [transformer]\nmeasure: {enabled: sure}", "config-schema", "enabled"),
    "measure-repeats-huge": ("suites: [transformer]\nmeasure: {repeats: 1000000000}", "caps", "repeats"),
    "case-name-list": ("cases: [{name: [1, 2], mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]", "config-schema", "name"),
    "case-name-dict": ("cases: [{name: {a: 1}, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]", "config-schema", "name"),
    "case-missing-dst": ("cases: [{name: a, mesh: 'x=2', src: '[4{x}]'}]", "config-schema", "dst"),
    "case-mesh-1e9": ("cases: [{name: a, mesh: 'x=1000000000', src: '[4{x}]', dst: '[4]'}]", "caps", "65,536"),
    "case-mesh-int": ("cases: [{name: a, mesh: 8, src: '[4{x}]', dst: '[4]'}]", "config-schema", "mesh"),
    "case-dtype": ("cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]', dtype: float99}]", "config-schema",
                   "float99"),
    "case-src-10^30": (f"cases: [{{name: a, mesh: 'x=2', src: '[{BIG}{{x}}]', dst: '[4]'}}]", "big-number", "digits"),
    "case-unknown-key": ("cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]', speed: 1}]", "config-schema",
                         "speed"),
    "case-dup": ("cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}, "
                 "{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]", "config-schema", "twice"),
    "whatif-inf": ("suites: [transformer]\nwhatif: {bandwidth_scale: [.inf]}", "config-schema", "bandwidth_scale"),
    "whatif-nan": ("suites: [transformer]\nwhatif: {latency_scale: [.nan]}", "config-schema", "latency_scale"),
    "whatif-bool": ("suites: [transformer]\nwhatif: {bandwidth_scale: [true]}", "config-schema", "bandwidth_scale"),
    "whatif-zero": ("suites: [transformer]\nwhatif: {bandwidth_scale: [0]}", "config-schema", "positive"),
    "whatif-itemsize-big": ("suites: [transformer]\nwhatif: {itemsize: [1000]}", "caps", "itemsize"),
    "whatif-int": ("suites: [transformer]\nwhatif: 3", "config-schema", "whatif"),
    "whatif-unknown": ("suites: [transformer]\nwhatif: {speed: [1]}", "config-schema", "speed"),
    "whatif-huge-list": ("suites: [transformer]\nwhatif: {bandwidth_scale: [" + ", ".join(["1.5"] * 1001) + "]}",
                         "caps", "bandwidth_scale"),
    "runner-timeout-neg": ("suites: [transformer]\nrunner: {timeout_s: -1}", "config-schema", "timeout_s"),
    "runner-timeout-inf": ("suites: [transformer]\nrunner: {timeout_s: .inf}", "config-schema", "timeout_s"),
    "runner-workers-float": ("suites: [transformer]\nrunner: {workers: 1.5}", "config-schema", "workers"),
    "runner-workers-0": ("suites: [transformer]\nrunner: {workers: 0}", "config-schema", "workers"),
    "runner-workers-huge": ("suites: [transformer]\nrunner: {workers: 1000000}", "caps", "workers"),
    "runner-simulator": ("suites: [transformer]\nrunner: {simulator: magic}", "config-schema", "simulator"),
    "machine-unknown": ("suites: [transformer]\nmachines: [tpu-v9]", "config-schema", "tpu-v9"),
    "machine-int": ("suites: [transformer]\nmachines: [3]", "config-schema", "machines"),
    "machine-empty": ("suites: [transformer]\nmachines: []", "config-schema", "machines"),
    "machine-sizes-key": ("suites: [transformer]\nmachines: [{profile: tpu-v4, sizes: {abc: 4x4}}]", "config-schema",
                          "sizes"),
    "machine-sizes-list": ("suites: [transformer]\nmachines: [{profile: tpu-v4, sizes: [1]}]", "config-schema",
                           "sizes"),
    "machine-sizes-wrong": ("suites: [transformer]\nmachines: [{profile: tpu-v4, sizes: {64: 4x4x2}}]",
                            "config-schema", "64"),
    "machine-sizes-huge": ("suites: [transformer]\nmachines: [{profile: cpu-host, sizes: {1000000: '1000000'}}]",
                           "caps", "sizes"),
    "planner-unknown": ("suites: [transformer]\nplanners: [fast]", "config-schema", "unknown planner"),
    "planner-dup": ("suites: [transformer]\nplanners: [normal, normal]", "config-schema", "twice"),
    "planner-empty": ("suites: [transformer]\nplanners: []", "config-schema", "planners"),
    "top-unknown": ("suites: [transformer]\nspeed: 3", "config-schema", "unknown key"),
    "top-list": ("- a\n- b", "config-schema", "top level"),
    "top-scalar": ("42", "config-schema", "top level"),
    "top-empty": ("", "config-schema", "top level"),
    "no-cases": ("machines: [tpu-v4]", "config-schema", "no cases"),
    "name-list": ("name: [1]\nsuites: [transformer]", "config-schema", "name"),
    "yaml-unclosed": ("suites: [transformer\nmachines: {a: b\n", "yaml", "YAML"),
    "yaml-tab": ("suites:\n\t- transformer\n", "yaml", "YAML"),
    "yaml-alias": ("a: &a [1]\nb: *c\n", "yaml", "YAML"),
    "yaml-python-tag": ("suites: !!python/object/apply:os.system ['true']", "yaml", "YAML"),
    "yaml-billion-laughs": ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
                            "suites: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]", "config-schema", "suites"),
    "yaml-deep": ("suites: " + "[" * 2000 + "]" * 2000, "yaml", None),
}
for k, (_text, cls, match) in CONFIGS.items():
    case(f"exp-config-{k}", cls, "experiments", ["run", "{tmp}/cfg-" + k + ".yaml", "--out", "{tmp}/o-" + k],
         "error", match)
for k, (f, cls) in {"missing": ("{tmp}/nope.yaml", "files"), "folder": ("{tmp}", "files"),
                    "nonutf8": ("{tmp}/nonutf8.yaml", "files"), "devzero": ("/dev/zero", "files"),
                    "bom": ("{tmp}/bom.yaml", "config-schema")}.items():
    case(f"exp-run-config-{k}", cls, "experiments", ["run", f, "--out", "{tmp}/o-x"])
for k, v in (("isfile", "{tmp}/nonutf8.yaml"), ("devfull", "/dev/full"), ("proc", "/proc/xx/out"),
             ("empty", "")):
    case(f"exp-run-out-{k}", "files", "experiments", ["run", "{tmp}/cfg-ok.yaml", "--out", v])
for k, v in (("0", "0"), ("neg", "-1"), ("huge", "1000000"), ("abc", "abc")):
    case(f"exp-run-workers-{k}", "caps" if k == "huge" else "syntax", "experiments",
         ["run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/o-w", "--workers", v])
for k, v in (("neg", "-1"), ("0", "0"), ("10^30", BIG)):
    case(f"exp-run-limit-{k}", "silent", "experiments", ["run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/o-l",
                                                       "--limit", v])
for k, v in (("missing", "{tmp}/nope"), ("file", "{tmp}/nonutf8.yaml"), ("emptydir", "{tmp}/emptydir"),
             ("garbagerows", "{tmp}/garbage"), ("nonutf8rows", "{tmp}/nonutf8rows"),
             ("listrows", "{tmp}/listrows")):
    case(f"exp-report-dir-{k}", "files", "experiments", ["report", v])
for k, extra in (("engine-bogus", ["--engine", "bogus"]), ("address-local", ["--address", "foo:1"]),
                 ("address-bad", ["--engine", "ray", "--address", "not a host"])):
    case(f"exp-run-{k}", "syntax", "experiments", ["run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/o-e", *extra])
case("exp-report-planner-bogus", "syntax", "experiments", ["report", "{tmp}/results", "--planner", "bogus"])
for k, v in (("folder", "{tmp}"), ("devfull", "/dev/full"), ("proc", "/proc/x/r.html")):
    case(f"exp-report-html-{k}", "files", "experiments", ["report", "{tmp}/results", "--html", v])
case("exp-suites-bogus", "syntax", "experiments", ["suites", "--suite", "bogus"])
case("exp-suites-json", "success", "experiments", ["suites", "--json"], "ok")
case("exp-no-command", "syntax", "experiments", [])


# ---- Python API ----
def _must(cond):
    if not cond:
        raise AssertionError("a documented success returned the wrong value")


def _parse_case(*args):
    from executor.compare import parse_case

    return parse_case(*args)


def _api_cases():
    import models
    import synth
    from synth import ArrayType, Mesh, Schedule, parse_type, synthesize

    def s(**kw):
        base = dict(mesh="x=2,y=4", src="[1024{y}, 512, 256{x}]", dst="[1024, 512{x,y}, 256]")
        base.update(kw)
        planner = base.pop("planner", "normal")
        itemsize = base.pop("itemsize", 4)
        return lambda: synthesize(base["mesh"], base["src"], base["dst"], planner=planner, itemsize=itemsize)

    out = {
        "mesh-of-none": lambda: Mesh.of(None), "mesh-of-int": lambda: Mesh.of(3),
        "mesh-of-float-size": lambda: Mesh.of({"x": 2.0}), "mesh-of-str-size": lambda: Mesh.of({"x": "2"}),
        "mesh-of-newline": lambda: Mesh.of({"x\n": 2}), "mesh-of-int-name": lambda: Mesh.of({1: 2}),
        "mesh-of-huge": lambda: Mesh.of({"x": 10**30}), "mesh-of-1e9": lambda: Mesh.of({"x": 10**9}),
        "mesh-of-neg": lambda: Mesh.of({"x": -1}), "mesh-of-empty": lambda: Mesh.of({}),
        "mesh-of-bytes": lambda: Mesh.of(b"x=2"), "mesh-of-list": lambda: Mesh.of([("x", 2)]),
        "mesh-tuple-bad": lambda: Mesh((("x", 2, 3),)), "mesh-bool": lambda: Mesh.of({"x": True}),
        "type-none": lambda: ArrayType.parse(None), "type-int": lambda: ArrayType.parse(3),
        "type-xy-axis": lambda: _must(ArrayType(((8, "xy"),)).dims[0].axes == ("xy",)), "type-bad-dim": lambda: ArrayType(((8, 3),)),
        "type-float-size": lambda: ArrayType(((8.5, ()),)), "type-huge": lambda: ArrayType(((10**30, ()),)),
        "type-rank1000": lambda: ArrayType(tuple((2, ()) for _ in range(1000))),
        "type-dims-none": lambda: ArrayType(None),
        "from-spec-shape-str": lambda: ArrayType.from_spec("x=2", ("x",)),
        "from-spec-spec-int": lambda: ArrayType.from_spec((8,), 3),
        "from-spec-shape-none": lambda: ArrayType.from_spec(None, ("x",)),
        "from-spec-entry-int": lambda: ArrayType.from_spec((8,), (3,)),
        "parse-type-code": lambda: parse_type("__import__('os').getcwd()", shape=(8,)),
        "parse-type-noshape": lambda: parse_type("P('x')"),
        "parse-type-shape-mismatch": lambda: parse_type("[8{x}]", shape=(4,)),
        "synth-planner-none": s(planner=None), "synth-planner-dict": s(planner={}),
        "synth-planner-list": s(planner=[]), "synth-itemsize-bool": s(itemsize=True),
        "synth-itemsize-float": s(itemsize=2.5), "synth-itemsize-str": s(itemsize="4"),
        "synth-itemsize-huge": s(itemsize=10**30), "synth-itemsize-0": s(itemsize=0),
        "synth-mesh-none": s(mesh=None), "synth-src-none": s(src=None), "synth-dst-int": s(dst=3),
        "synth-shape-mismatch": s(dst="[1024, 512]"),
        "schedule-none": lambda: Schedule.from_dict(None), "schedule-list": lambda: Schedule.from_dict([]),
        "schedule-noops": lambda: Schedule.from_dict({"num_devices": 2}),
        "profile-none": lambda: models.load_profile(None), "profile-int": lambda: models.load_profile(3),
        "profile-unknown": lambda: models.load_profile("nope"),
        "profile-100000": lambda: models.load_profile("cpu-host:100000"),
        "profile-huge-torus": lambda: models.load_profile(f"tpu-v4:{BIG}x4x4"),
        "plan-from-dict-none": lambda: synth.Plan.from_dict(None),
        "plan-from-dict-empty": lambda: synth.Plan.from_dict({}),
        "plan-from-dict-str": lambda: synth.Plan.from_dict("plan"),
        "plan-from-dict-steps": lambda: synth.Plan.from_dict({"mesh": {"x": 2}, "src": "[4{x}]", "dst": "[4]",
                                                              "steps": [{"op": "teleport"}]}),
        "plan-from-dict-itemsize": lambda: synth.Plan.from_dict({"mesh": {"x": 2}, "src": "[4{x}]", "dst": "[4]",
                                                                 "steps": [], "itemsize": 10**30}),
        "with-scale-str": lambda: models.load_profile("cpu-host:8").with_scale("2"),
        "with-scale-inf": lambda: models.load_profile("cpu-host:8").with_scale(float("inf")),
        "parse-case-digits": lambda: _parse_case("x=8", "P('x')", "P()", "8," + "9" * 40),
        "parse-case-exp": lambda: _parse_case("x=8", "P('x')", "P()", "1e30"),
        "parse-case-code": lambda: _parse_case("x=8", "P(__import__('os'))", "P()", "8"),
        "synth-ok": s(),
    }
    for k, fn in out.items():
        yield k, fn, "ok" if k in API_OK else "error"


API_IDS = ["mesh-of-none", "mesh-of-int", "mesh-of-float-size", "mesh-of-str-size", "mesh-of-newline",
           "mesh-of-int-name", "mesh-of-huge", "mesh-of-1e9", "mesh-of-neg", "mesh-of-empty", "mesh-of-bytes",
           "mesh-of-list", "mesh-tuple-bad", "mesh-bool", "type-none", "type-int", "type-xy-axis", "type-bad-dim",
           "type-float-size", "type-huge", "type-rank1000", "type-dims-none", "from-spec-shape-str",
           "from-spec-spec-int", "from-spec-shape-none", "from-spec-entry-int", "parse-type-code",
           "parse-type-noshape", "parse-type-shape-mismatch", "synth-planner-none", "synth-planner-dict",
           "synth-planner-list", "synth-itemsize-bool", "synth-itemsize-float", "synth-itemsize-str",
           "synth-itemsize-huge", "synth-itemsize-0", "synth-mesh-none", "synth-src-none", "synth-dst-int",
           "synth-shape-mismatch", "schedule-none", "schedule-list", "schedule-noops", "profile-none",
           "profile-int", "profile-unknown", "profile-100000", "profile-huge-torus", "plan-from-dict-none",
           "plan-from-dict-empty", "plan-from-dict-str", "plan-from-dict-steps", "plan-from-dict-itemsize",
           "with-scale-str", "with-scale-inf", "parse-case-digits", "parse-case-exp", "parse-case-code", "synth-ok"]
#: documented successes: a plain plan; a string names one axis (not one axis per letter)
API_OK = {"synth-ok", "type-xy-axis"}
for k in API_IDS:
    case(f"api-{k}", "success" if k in API_OK else "api", "api", k, "ok" if k in API_OK else "error")

# ---- the app (Streamlit AppTest): sidebar inputs on the Plan page ----
APP_INPUTS = {
    "mesh": ["", "x", "x=1000000000", f"x={BIG}", f"x={DIGITS_5000}", "x=2,x=2", "data=16;model=4", "x\n=2"],
    "shape": ["", "a,b", "1e30", f"{BIG}, 8", DIGITS_5000, ", ".join(["2"] * 1000), "-8, 8", "100000000000, 100000000000"],
    "src": ["", "[8192{q}, 32768]", f"[{BIG}{{data}}, 32768{{model}}]", "__import__('os')", "[" * 3000],
    "dst": ["", "P('zzz')", "[8192, 32768]{U:q}", "[1e30]"],
    "machine_size": ["", "0", "100000", f"{BIG}", "4x4", "abc", "4x4x4x4x4"],
}
for key, values in APP_INPUTS.items():
    for i, v in enumerate(values):
        # an empty shape means "the shardings' own shape"; an empty size "the profile's default"
        empty_ok = v == "" and key in ("shape", "machine_size")
        case(f"app-{key}-{i}", "success" if empty_ok else "app", "app", (key, v), "ok" if empty_ok else "error")
case("app-default", "success", "app", None, "ok")
# page inputs: folder boxes outside the results root, devices, damaged files
PAGE_INPUTS = {
    ("ui/pages/sweeps.py", "sweeps_dir"): ["/etc", "/dev/zero", "../../..", "/nonexistent/folder",
                                           "{tmp}/nonutf8rows", "{tmp}/garbage", "\x00"],
    ("ui/pages/calibration.py", "calib_dir"): ["/etc", "/dev/zero", "/nonexistent/folder", "{tmp}/nonutf8.json",
                                               "../../.."],
}
# (placements on the Simulate and Compare pages are checked when the page's background
# simulation finishes, which AppTest does not wait for; the CLI cases cover them)
for (page, key), values in PAGE_INPUTS.items():
    for i, v in enumerate(values):
        case(f"app-{key}-{i}", "app", "app", (page, key, v), "error")

# ==== round three (issue 22): profiles, schedule meta and caps, validate data, run folders,
# ==== Ray addresses, shared links, environment, compiles, CLI consistency ====
#: per-case environment (set for the case, restored after it)
ENVS: dict[str, dict] = {}
#: per-case check after the case ran: ``fn(tmp) -> (ok, why)`` (e.g. a link's target unchanged)
POSTS: dict = {}


def case3(cid, cls, surface, target, expect="error", match=None, env=None, post=None):
    case(cid, cls, surface, target, expect, match)
    if env:
        ENVS[cid] = env
    if post:
        POSTS[cid] = post


# ---- profiles: every parameter, hostile values (simulator run --hardware FILE:SIZE) ----
PROFILE_PARAMS = {  # param -> (base profile, size)
    "link_bandwidth_Bps": ("dgx-h100", "1"), "link_latency_s": ("dgx-h100", "1"),
    "links_per_chip": ("dgx-h100", "1"), "launch_overhead_s": ("dgx-h100", "1"),
    "hbm_bandwidth_Bps": ("dgx-h100", "1"), "hbm_capacity_bytes": ("dgx-h100", "1"),
    "gpus_per_node": ("dgx-h100", "1"), "nic_bandwidth_Bps": ("dgx-h100", "2"),
    "nic_latency_s": ("dgx-h100", "2"), "bus_bandwidth_Bps": ("cpu-host", "8"),
    "nics_per_node": ("dgx-h100", "2"), "link_efficiency": ("dgx-h100", "1"),
    "nic_efficiency": ("dgx-h100", "2"), "nvls_efficiency": ("dgx-h100", "1"), "sharp": ("dgx-h100", "2"),
    "max_net_rings": ("dgx-h100", "2"), "ramp_half_bytes": ("dgx-h100", "1"),
    "ramp_ranks_exponent": ("dgx-h100", "1"), "reduce_bandwidth_Bps": ("dgx-h100", "1"),
    "ll_base_latency_s": ("dgx-h100", "1"), "ll128_base_latency_s": ("dgx-h100", "1"),
    "simple_base_latency_s": ("dgx-h100", "1"), "ll_hop_latency_s": ("dgx-h100", "1"),
    "ll128_hop_latency_s": ("dgx-h100", "1"), "simple_hop_latency_s": ("dgx-h100", "1"),
    "ll_max_bandwidth_Bps": ("dgx-h100", "1"),
}
#: parameters for which 0 is a documented value (no latency, "use the default", "none")
PROFILE_ZERO_OK = {"link_latency_s", "launch_overhead_s", "nic_latency_s", "nics_per_node", "nvls_efficiency",
                   "sharp", "max_net_rings", "ramp_half_bytes", "ramp_ranks_exponent", "reduce_bandwidth_Bps",
                   "ll_base_latency_s", "ll128_base_latency_s", "simple_base_latency_s", "ll_hop_latency_s",
                   "ll128_hop_latency_s", "simple_hop_latency_s", "ll_max_bandwidth_Bps"}
PROFILE_VALUES = {"zero": "0", "neg": "-1", "1e308": "1e308", "nan": ".nan", "inf": ".inf", "str": "fast",
                  "bool": "true", "list": "[1]"}


def _profile_run(path_and_size, devices):
    return ["run", "--hardware", path_and_size, "--mesh", f"x={devices}", "--src", f"[{8 * devices}{{x}}]",
            "--dst", f"[{8 * devices}]", "--json"]


for _p, (_base, _size) in PROFILE_PARAMS.items():
    _dev = 8 * int(_size) if _base == "dgx-h100" else int(_size)
    for _k, _v in PROFILE_VALUES.items():
        _ok = _k == "zero" and _p in PROFILE_ZERO_OK
        case3(f"profile-{_p}-{_k}", "success" if _ok else "profile-file", "simulator",
              _profile_run(f"{{tmp}}/prof-{_p}-{_k}.yaml:{_size}", _dev), "ok" if _ok else "error",
              None if _ok else _p)
for _k, _what in (("alpha_s", "1e308"), ("bandwidth_Bps", "0"), ("latency_s", ".nan"), ("latency_s", "-1")):
    case3(f"profile-override-{_k}-{_what}", "profile-file", "simulator",
          _profile_run(f"{{tmp}}/prof-ov-{_k}-{_what.strip('.')}.yaml:1", 8), "error", _k)
for _k, _m in (("chain1500", "extends"), ("cycle", "cycle"), ("sparse3g", "limit"), ("fifo", "pipe"),
               ("folder", "folder"), ("devzero-link", "not a regular file"), ("nonmapping", "mapping"),
               ("pytag", "YAML"), ("deep", "nested"), ("unknown-key", "unknown"), ("bom", None)):
    _m = None if _k == "deep" else _m
    _exp = "ok" if _k == "bom" else "error"
    case3(f"profile-file-{_k}", "success" if _exp == "ok" else "profile-file", "simulator",
          _profile_run(f"{{tmp}}/pf-{_k}.yaml:8", 8), _exp, _m)
case3("profile-api-ramp-1e308", "profile-file", "api", "profile-ramp")
case3("profile-api-chain", "profile-file", "api", "profile-chain")

# ---- schedule files: meta, caps, special files ----
SCHED3 = {"ops-86mb": "limit", "meta-initial-abc": "initial_bytes", "meta-initial-1e30": "initial_bytes",
          "meta-initial-list": "initial_bytes", "meta-initial-neg": "initial_bytes",
          "meta-initial-bool": "initial_bytes", "meta-itemsize-list": "itemsize", "meta-itemsize-1e40": "itemsize",
          "meta-itemsize-0": "itemsize", "meta-itemsize-65": "itemsize", "meta-mesh-int": "mesh",
          "meta-not-object": "meta", "ops-over-cap": "ops", "ids-over-cap": "device ids", "nan-bytes": "finite",
          "inf-bytes": "finite", "fifo": "pipe", "sparse3g": "limit", "devzero-link": "not a regular file"}
for _k, _m in SCHED3.items():
    _env = {"ops-over-cap": {"REDIST_LIMIT_SCHEDULE_OPS": "1"},
            "ids-over-cap": {"REDIST_LIMIT_SCHEDULE_IDS": "3"}}.get(_k)
    case3(f"schedule-{_k}", "schedule-file", "simulator",
          ["run", "--hardware", "cpu-host:2", "--schedule", f"{{tmp}}/s3-{_k}.json"], "error", _m, env=_env)
case3("schedule-meta-ok", "success", "simulator",
      ["run", "--hardware", "cpu-host:2", "--schedule", "{tmp}/s3-meta-ok.json", "--json"], "ok")
for _k in ("none", "list", "ops-str", "op-str", "op-kind", "bytes-str", "groups-int", "devices-str", "meta-list",
           "pairs-bad"):
    case3(f"api-schedule-from-dict-{_k}", "api", "api", f"schedule-{_k}")
for _k in ("steps-str", "steps-int", "step-str", "step-dim-str", "mesh-list", "mesh-str-bad", "src-int",
           "planner-list", "itemsize-str", "steps-deep"):
    case3(f"api-plan-from-dict-{_k}", "api", "api", f"plan-{_k}")

# ---- simulator validate --data ----
VALIDATE = {"empty": None, "list": None, "rows-not-list": "rows", "row-not-mapping": "row",
            "zero-time": "time_s", "zero-size": "size_bytes", "zero-devices": "devices", "unknown-key": "speed",
            "bad-profile": "profile", "nan-time": "time_s", "neg-size": "size_bytes", "huge-devices": "devices",
            "str-size": "size_bytes", "fifo": "pipe", "sparse3g": "limit", "nonutf8": "UTF-8"}
#: simulator/validate.py's --data schema is the machine-model engineer's (issue 22); its cases
#: join the corpus once validate reads through synth.fileio.read_validated
VALIDATE_CASES = True
for _k, _m in (VALIDATE.items() if VALIDATE_CASES else ()):
    case3(f"validate-data-{_k}", "validate-data", "simulator", ["validate", "--data", f"{{tmp}}/v-{_k}.yaml"],
          "error", _m)
for _k, _f in ((("devzero", "/dev/zero"), ("folder", "{tmp}"), ("missing", "{tmp}/nope.yaml"))
               if VALIDATE_CASES else ()):
    case3(f"validate-data-{_k}", "validate-data", "simulator", ["validate", "--data", _f])


# ---- run folders and written files: a link, a FIFO or a folder in place of each ----
def _unchanged(name):
    """The file a link pointed at is byte-for-byte unchanged (its SHA-256)."""
    def check(tmp):
        import hashlib

        p = Path(tmp) / "outside" / name
        got = hashlib.sha256(p.read_bytes()).hexdigest()
        want = (Path(tmp) / "outside" / (name + ".sha256")).read_text()
        return got == want, f"{p} changed" if got != want else "unchanged"
    return check


for _f in (".lock", "rows.jsonl"):
    for _k, _m in (("link", "link"), ("fifo", "pipe"), ("folder", "folder"), ("devzero-link", "link"),
                   ("dangling-link", "link")):
        _n = f"rf-{_f.strip('.')}-{_k}"
        case3(f"run-folder-{_f.strip('.')}-{_k}", "run-folder", "experiments",
              ["run", "{tmp}/cfg-ok.yaml", "--out", f"{{tmp}}/{_n}"], "error", _m,
              post=_unchanged(f"{_n}.txt") if _k == "link" else None)
for _k, _m in (("link", "link"), ("fifo", "pipe"), ("folder", "folder"), ("devzero-link", "link")):
    case3(f"report-rows-{_k}", "run-folder", "experiments", ["report", f"{{tmp}}/rr-{_k}"], "error", _m)
for _k in ("link", "fifo"):
    _m = "link" if _k == "link" else "pipe"
    case3(f"sim-trace-{_k}", "run-folder", "simulator", SMALL_RUN + ["--trace", f"{{tmp}}/w-trace-{_k}"],
          "error", _m, post=_unchanged(f"w-trace-{_k}.txt") if _k == "link" else None)
    case3(f"sim-chrome-trace-{_k}", "run-folder", "simulator",
          SMALL_RUN + ["--chrome-trace", f"{{tmp}}/w-chrome-{_k}"], "error", _m,
          post=_unchanged(f"w-chrome-{_k}.txt") if _k == "link" else None)
    case3(f"exec-codegen-out-{_k}", "run-folder", "executor", CG + ["--out", f"{{tmp}}/w-codegen-{_k}"],
          "error", _m, post=_unchanged(f"w-codegen-{_k}.txt") if _k == "link" else None)
case3("sim-chrome-trace-empty", "run-folder", "simulator", SMALL_RUN + ["--chrome-trace", ""], "error", "empty")

for _k, _m in (("fifo", "pipe"), ("sparse3g", "limit"), ("devzero-link", "not a regular file"),
               ("folder-yaml", "folder")):
    case3(f"exp-run-config-{_k}", "run-folder", "experiments", ["run", f"{{tmp}}/cfg3-{_k}.yaml", "--out", "{tmp}/o-c3"],
          "error", _m)

# ---- Ray addresses (every attempt has a deadline; host names checked first) ----
RAY_ADDR = {"host300": "a" * 300 + ":6379", "label64": "a" * 64 + ".example:6379", "unicode": "héad:6379",
            "port0": "127.0.0.1:0", "port99999": "127.0.0.1:99999", "port-abc": "127.0.0.1:abc",
            "colons": "::::", "empty-host": ":6379", "scheme-only": "ray://", "nul": "head\x00:6379",
            "silent": "127.0.0.1:{silent_port}", "http": "127.0.0.1:{http_port}",
            "closed": "127.0.0.1:{closed_port}"}
for _k, _a in RAY_ADDR.items():
    case3(f"ray-address-{_k}", "ray", "experiments",
          ["run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/o-ray", "--engine", "ray", "--address", _a], "error",
          None, env={"REDIST_LIMIT_CONNECT_S": "1"})

# ---- the app through a shared link: user text escaped, replaced values said ----
LINK_TEXT = {"image": "![x](http://evil.example/p.png)", "link": "[click](http://evil.example)",
             "autolink": "<http://evil.example>", "bare-url": "http://evil.example/x", "www": "www.evil.example",
             "latex": "$x^2$", "colour": ":red[alarm]"}
for _field in ("mesh", "shape", "src", "dst", "machine_size"):
    for _k, _t in LINK_TEXT.items():
        case3(f"app-link-{_field}-{_k}", "app-link", "app", ("url", {_field: _t}, None), "error")
for _k, _v in (("dtype", "float8"), ("planner", "fastest"), ("machine_profile", "tpu-v99")):
    case3(f"app-link-{_k}-replaced", "app-link", "app", ("url", {_k: _v}, None), "warning", _v)
case3("app-link-results-rows-link", "app-link", "app", ("page", "ui/pages/sweeps.py", "sweeps_dir", "{tmp}/approot/r-link"),
      "error", None, env={"APP_RESULTS_ROOT": "{tmp}/approot"})
case3("app-link-results-dir-link", "app-link", "app", ("page", "ui/pages/sweeps.py", "sweeps_dir", "{tmp}/approot/r-dirlink"),
      "error", None, env={"APP_RESULTS_ROOT": "{tmp}/approot"})
case3("app-link-results-rows-fifo", "app-link", "app", ("page", "ui/pages/sweeps.py", "sweeps_dir", "{tmp}/approot/r-fifo"),
      "error", None, env={"APP_RESULTS_ROOT": "{tmp}/approot"})
case3("app-link-calibration-json-link", "app-link", "app",
      ("page", "ui/pages/calibration.py", "calib_dir", "{tmp}/approot/cal-link"), "error", None,
      env={"APP_RESULTS_ROOT": "{tmp}/approot"})
case3("app-link-calibration-markdown-in-file", "app-link", "app",
      ("page", "ui/pages/calibration.py", "calib_dir", "{tmp}/approot/cal-md"), "shown", None,
      env={"APP_RESULTS_ROOT": "{tmp}/approot"})
for _k in ("mesh-shapes-12-axes", "fit-mesh-12-axes", "escape-md"):
    case3(f"api-ui-{_k}", "app-link", "api", f"ui-{_k}", "ok")

# ---- environment ----
for _k, _v in (("inf", "inf"), ("nan", "nan"), ("neg", "-5"), ("abc", "abc"), ("zero", "0"), ("1e400", "1e400")):
    case3(f"env-memory-budget-{_k}", "env", "executor", CMP + ["--devices", "8"], "error",
          "REDIST_MEMORY_BUDGET_BYTES", env={"REDIST_MEMORY_BUDGET_BYTES": _v})
for _k, _env in (("id-alone", {"REDIST_PROCESS_ID": "0"}),
                 ("id-and-num", {"REDIST_PROCESS_ID": "0", "REDIST_NUM_PROCESSES": "2"}),
                 ("id-out-of-range", {"REDIST_PROCESS_ID": "5", "REDIST_NUM_PROCESSES": "2",
                                      "REDIST_COORDINATOR": "127.0.0.1:1234", "REDIST_LOCAL_DEVICES": "4"}),
                 ("id-str", {"REDIST_PROCESS_ID": "zero", "REDIST_NUM_PROCESSES": "2",
                             "REDIST_COORDINATOR": "127.0.0.1:1234", "REDIST_LOCAL_DEVICES": "4"}),
                 ("coord-bad", {"REDIST_PROCESS_ID": "0", "REDIST_NUM_PROCESSES": "2",
                                "REDIST_COORDINATOR": "a" * 300, "REDIST_LOCAL_DEVICES": "4"})):
    case3(f"env-process-{_k}", "env", "executor", CMP + ["--devices", "8"], "error", "REDIST_", env=_env)
for _k, _v in (("abc", "abc"), ("zero", "0"), ("neg", "-3"), ("huge", "9" * 50)):
    case3(f"env-limit-devices-{_k}", "env", "synth", PLAN, "error", "REDIST_LIMIT_DEVICES",
          env={"REDIST_LIMIT_DEVICES": _v})
case3("env-limit-file-bytes", "env", "simulator", ["run", "--hardware", "cpu-host:2", "--schedule", "{tmp}/s-ok.json"],
      "error", "REDIST_LIMIT_FILE_BYTES", env={"REDIST_LIMIT_FILE_BYTES": "10"})
case3("env-processes-memory", "env", "executor",
      ["compare", "--mesh", "x=24", "--src", "[24{x}]", "--dst", "[24]", "--devices", "24", "--processes", "24"],
      "error", "memory", env={"REDIST_MEMORY_BUDGET_BYTES": "1e9"})
case3("env-devices-memory", "env", "executor", CMP + ["--devices", "8192"], "error", "memory",
      env={"REDIST_MEMORY_BUDGET_BYTES": "1e9"})
case3("exp-tpu-memory-planner-bogus", "env", "experiments", ["tpu-memory", "--planner", "bogus"], "error", "bogus")
for _k in ("from-spec-unreduced-int", "from-spec-unreduced-list-int", "refine-subaxis-3x4", "refine-subaxis-0",
           "refine-subaxis-unknown", "refine-ok"):
    case3(f"api-{_k}", "success" if _k == "refine-ok" else "api", "api", _k, "ok" if _k == "refine-ok" else "error")

# ---- compiles: estimated before, one line when they do not fit ----
case3("compile-xla-schedule-estimate", "compile", "executor",
      ["xla-schedule", "--check", "--mesh", "x=8", "--src", "[8{x}, 33554432]", "--dst", "[8, 33554432{x}]"],
      "error",
      "compile", env={"REDIST_MEMORY_BUDGET_BYTES": "3e9"})
for _k in ("guard-cpu-over-budget", "guard-resource-exhausted", "guard-memoryerror", "guard-other-error"):
    case3(f"api-compile-{_k}", "compile", "api", f"compile-{_k}", "ok" if _k == "guard-other-error" else "error")

# ---- round three, second pass: the join deadline, every compile site, the compile slot ----
for _k, _v in (("zero", "0"), ("neg", "-1"), ("inf", "inf"), ("nan", "nan"), ("abc", "abc"), ("601", "601"),
               ("1e308", "1e308"), ("long", "9" * 60)):
    case3(f"env-join-timeout-{_k}", "ray", "executor", CMP + ["--devices", "8", "--processes", "2"], "error",
          "REDIST_JOIN_TIMEOUT_S", env={"REDIST_JOIN_TIMEOUT_S": _v})
    case3(f"exec-join-timeout-flag-{_k}", "ray", "executor",
          CMP + ["--devices", "8", "--processes", "2", "--join-timeout", _v], "error", "--join-timeout")
case3("env-join-timeout-member", "ray", "executor", CMP + ["--devices", "8", "--processes", "2"], "error",
      "REDIST_JOIN_TIMEOUT_S", env={"REDIST_PROCESS_ID": "0", "REDIST_NUM_PROCESSES": "2", "REDIST_LOCAL_DEVICES": "4",
                                    "REDIST_COORDINATOR": "127.0.0.1:1", "REDIST_JOIN_TIMEOUT_S": "0"})
case3("exec-join-timeout-cluster", "ray", "executor", CMP + ["--devices", "8", "--cluster", "--join-timeout", "inf"],
      "error", "--join-timeout")
#: a small CPU run whose estimate fits once but not twice under a 500 MB budget: it needs the slot
_SLOT_RUN = ["xla-schedule", "--check", "--mesh", "x=8", "--src", "[8{x}, 1024]", "--dst", "[8, 1024{x}]",
             "--devices", "8"]
for _k, _m in (("folder-link", "link"), ("lock-link", "link"), ("lock-fifo", "pipe"), ("lock-folder", "folder"),
               ("not-a-folder", "REDIST_CACHE_DIR")):
    case3(f"compile-cache-{_k}", "compile", "executor", _SLOT_RUN, "error", _m,
          env={"REDIST_CACHE_DIR": f"{{tmp}}/cc-{_k}", "REDIST_MEMORY_BUDGET_BYTES": "5e8"},
          post=_unchanged("cc-lock-link.txt") if _k == "lock-link" else None)
case3("compile-compare-1gib-estimate", "compile", "executor",
      ["compare", "--mesh", "x=8", "--src", "[8{x}, 67108864]", "--dst", "[8, 67108864{x}]", "--dtype", "bfloat16",
       "--devices", "8"], "error", "the cpu compiles and runs", env={"REDIST_MEMORY_BUDGET_BYTES": "1e10"})
case3("compile-xla-schedule-512mib-app-layout", "compile", "executor",
      ["xla-schedule", "--check", "--mesh", "data=16,model=4", "--src", "[8192{data}, 32768{model}]",
       "--dst", "P('model','data')", "--dtype", "bfloat16", "--devices", "64"], "error", "6.4 GiB",
      env={"REDIST_MEMORY_BUDGET_BYTES": "4e9"})
for _cmd in ("compare", "xla-schedule"):
    case3(f"compile-{_cmd}-target-hbm", "compile", "executor",
          [_cmd, "--target", "tpu-v4:2x2x2", "--mesh", "x=8", "--src", "[8{x}, 8589934592]",
           "--dst", "[8, 8589934592{x}]", "--json"], "error", "failed for memory: the program needs 96.00 GiB")
for _k in ("guard-aot-over-budget", "guard-hbm-used", "killed-line", "join-timeout-values"):
    case3(f"api-compile-{_k}", "compile" if "join" not in _k else "ray", "api", f"compile-{_k}",
          "ok" if _k in ("killed-line", "join-timeout-values") else "error")

# ---- consistency: both spellings everywhere, JSON errors, no internal names ----
for _surface, _cmd in (("synth", ["plan"]), ("simulator", ["run", "--hardware", "cpu-host:8"])):
    _tag = _surface[:3]
    case3(f"{_tag}-pspec-shape-ok", "consistency", _surface,
          _cmd + ["--mesh", "x=8", "--src", "P('x')", "--shape", "64", "--dst", "P()", "--json"], "ok")
    case3(f"{_tag}-pspec-from-other-ok", "consistency", _surface,
          _cmd + ["--mesh", "x=8", "--src", "P('x', None)", "--dst", "[64, 8]", "--json"], "ok")
    case3(f"{_tag}-dtype-ok", "consistency", _surface,
          _cmd + ["--mesh", "x=8", "--src", "[64{x}]", "--dst", "[64]", "--dtype", "bfloat16", "--json"], "ok")
    for _k, _extra, _m in (("dtype-bogus", ["--dtype", "float8"], "float8"),
                           ("dtype-itemsize-mismatch", ["--dtype", "bfloat16", "--itemsize", "4"], "disagrees"),
                           ("pspec-no-shape", ["--src", "P('x')", "--dst", "P()"], "shape"),
                           ("shape-bad", ["--src", "P('x')", "--dst", "P()", "--shape", "8,,8"], "--shape"),
                           ("shape-10^30", ["--src", "P('x')", "--dst", "P()", "--shape", BIG], "--shape"),
                           ("src-unknown-axis", ["--src", "[64{q}]", "--dst", "[64]"], "--src"),
                           ("dst-pspec-bad", ["--src", "[64{x}]", "--dst", "P('x', 'x')"], "--dst"),
                           ("pspec-code", ["--src", "P(__import__('os'))", "--dst", "P()", "--shape", "64"], "--src")):
        case3(f"{_tag}-{_k}", "consistency", _surface, _cmd + ["--mesh", "x=8", *_extra, "--json"], "error", _m)
for _surface, _argv in (("synth", ["plan", "--bogus", "--json"]), ("simulator", ["run", "--mesh", "x=0", "--json"]),
                        ("executor", ["codegen", "--mesh", "x=2", "--src", "[4{q}]", "--dst", "[4]", "--json"]),
                        ("experiments", ["run", "{tmp}/nope.yaml", "--out", "{tmp}/o-j", "--json"]),
                        ("experiments", ["suites", "--suite", "bogus", "--json"]),
                        ("simulator", ["run", "--schedule", "/dev/zero", "--json"]),
                        ("simulator", ["validate", "--data", "/dev/zero", "--json"])):
    case3(f"json-error-{_surface}-{_argv[0]}-{len(CASES)}", "consistency", _surface, _argv, "error")

# ---- real subprocesses: a sample, including the examples ----
SUB = [
    ("sub-synth-plan-mesh-1e9", ["synth", "plan", "--mesh", "x=1000000000", "--src", "[1000000000{x}]",
                                 "--dst", "[1000000000]"], "error"),
    ("sub-synth-bench-cases-1e30", ["synth", "bench", "--cases", "1e30"], "error"),
    ("sub-synth-bench-cases-10^30", ["synth", "bench", "--cases", BIG], "error"),
    ("sub-synth-itemsize-10^30", ["synth", "plan", "--itemsize", BIG], "error"),
    ("sub-synth-src-5000digits", ["synth", "plan", "--src", f"[{DIGITS_5000}]"], "error"),
    ("sub-synth-src-rank1000", ["synth", "plan", "--src", "[" + ", ".join(["2"] * 1000) + "]"], "error"),
    ("sub-sim-hardware-100000", ["simulator", "run", "--hardware", "cpu-host:100000", "--mesh", "x=100000",
                                 "--src", "[100000{x}]", "--dst", "[100000]"], "error"),
    ("sub-sim-bandwidth-inf", ["simulator", "run", "--bandwidth-scale", "inf"], "error"),
    ("sub-sim-schedule-negbytes", ["simulator", "run", "--hardware", "cpu-host:8", "--schedule",
                                   "{tmp}/s-negbytes.json"], "error"),
    ("sub-sim-trace-devfull", ["simulator", "run", "--trace", "/dev/full"], "error"),
    ("sub-exec-xla-schedule-devices-100000", ["executor", "xla-schedule", "--mesh", "x=100000", "--src",
                                              "[100000{x}]", "--dst", "[100000]", "--devices", "100000"], "error"),
    ("sub-exec-report-cases-0", ["executor", "report", "--cases", "0"], "error"),
    ("sub-exec-compiled-machine-unknown", ["executor.compiled", "--machine", "nope", "--mesh", "x=8", "--src",
                                           "[8{x}]", "--dst", "[8]"], "error"),
    ("sub-exec-compiled-machine-mismatch", ["executor.compiled", "--machine", "tpu-v4:4x4x4", "--mesh", "x=8",
                                            "--src", "[8{x}]", "--dst", "[8]"], "error"),
    ("sub-exec-compiled-strategy-unknown", ["executor.compiled", "--machine", "cpu-host:8", "--mesh", "x=8",
                                            "--src", "[8{x}]", "--dst", "[8]", "--strategies", "magic"], "error"),
    ("sub-exec-report-calibration-dir", ["executor", "report", "--calibration", "{tmp}"], "error"),
    ("sub-exec-calibrate-out-dir", ["executor", "calibrate", "--out", "{tmp}"], "error"),
    ("sub-exec-codegen-out-devfull", ["executor", *CG, "--out", "/dev/full"], "error"),
    ("sub-exp-config-count-1e30", ["experiments", "run", "{tmp}/cfg-count-1.0e30.yaml", "--out", "{tmp}/o"], "error"),
    ("sub-exp-config-yaml", ["experiments", "run", "{tmp}/cfg-yaml-unclosed.yaml", "--out", "{tmp}/o"], "error"),
    ("sub-exp-limit-neg", ["experiments", "run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/o", "--limit", "-1"], "error"),
    ("sub-exp-config-nonutf8", ["experiments", "run", "{tmp}/nonutf8.yaml", "--out", "{tmp}/o"], "error"),
    # round three (issue 22)
    ("sub-sim-profile-bus-zero", ["simulator", "run", *_profile_run("{tmp}/prof-bus_bandwidth_Bps-zero.yaml:8", 8)],
     "error"),
    ("sub-sim-schedule-ops-86mb", ["simulator", "run", "--hardware", "cpu-host:2", "--schedule",
                                   "{tmp}/s3-ops-86mb.json"], "error"),
    ("sub-exp-run-rows-fifo", ["experiments", "run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/rf-rows.jsonl-fifo"],
     "error"),
    ("sub-exp-run-lock-link", ["experiments", "run", "{tmp}/cfg-ok.yaml", "--out", "{tmp}/rf-lock-link"], "error"),
    ("sub-synth-plan-json-error", ["synth", "plan", "--src", "[8{q}]", "--json"], "error"),
    ("sub-synth-plan-pspec-ok", ["synth", "plan", "--mesh", "x=8", "--src", "P('x')", "--shape", "64", "--dst",
                                 "P()", "--dtype", "bfloat16", "--json"], "ok"),
    ("sub-synth-plan-ok", ["synth", "plan", "--json"], "ok"),
    ("sub-sim-run-ok", ["simulator", "run", "--hardware", "cpu-host:8", "--mesh", "x=8", "--src", "[64{x}]",
                        "--dst", "[64]", "--json"], "ok"),
    ("sub-exec-codegen-ok", ["executor", *CG], "ok"),
    ("sub-exp-suites-ok", ["experiments", "suites", "--json"], "ok"),
    # round three, second pass: the join deadline and the compiles
    ("sub-exec-join-timeout-zero", ["executor", *CMP, "--devices", "8", "--processes", "2", "--join-timeout", "0"],
     "error"),
    ("sub-exec-compare-target-hbm", ["executor", "compare", "--target", "tpu-v4:2x2x2", "--mesh", "x=8", "--src",
                                     "[8{x}, 8589934592]", "--dst", "[8, 8589934592{x}]", "--json"], "error"),
]


# -- fixtures: hostile files -------------------------------------------------------------------
def make_files(tmp: Path) -> None:
    (tmp / "out").mkdir(exist_ok=True)
    (tmp / "emptydir").mkdir(exist_ok=True)
    (tmp / "nonutf8.yaml").write_bytes(b"name: \xff\xfe caf\xe9\n")
    (tmp / "nonutf8.json").write_bytes(b'{"num_devices": 2, "name": "\xff"}')
    (tmp / "bad.json").write_text('{"num_devices": 2, "ops": [')
    (tmp / "list.json").write_text("[1, 2, 3]")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "empty.json").write_text("")
    (tmp / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (tmp / "bom.yaml").write_bytes(b"\xef\xbb\xbfsuites: [transformer]\nplanners: [fast]\n")
    op = {"kind": "all_gather", "in_bytes": 4, "out_bytes": 8, "send_bytes": 4, "recv_bytes": 4,
          "groups": [[0, 1]], "label": ""}
    good = {"name": "s", "num_devices": 2, "meta": {}, "ops": [op]}

    def sched(name, **change):
        d = json.loads(json.dumps(good))
        ops_change = change.pop("op", None)
        d.update(change)
        if ops_change:
            d["ops"][0].update(ops_change)
        (tmp / f"s-{name}.json").write_text(json.dumps(d))

    sched("ok")
    sched("negbytes", op={"recv_bytes": -4})
    sched("floatid", op={"groups": [[0, 1.5]]})
    sched("repeated", op={"groups": [[0, 0]]})
    sched("outside", op={"groups": [[0, 5]]})
    sched("hugedevices", num_devices=10**12)
    sched("zerodevices", num_devices=0)
    sched("badkind", op={"kind": "teleport"})
    sched("bytes1e30", op={"in_bytes": 10**30})
    sched("emptygroup", op={"groups": [[]]})
    sched("permutegroups", op={"kind": "permute"})
    sched("twogroups", op={"groups": [[0, 1], [1, 0]]})
    sched("boolbytes", op={"in_bytes": True})
    sched("strbytes", op={"in_bytes": "4"})
    (tmp / "s-noops.json").write_text(json.dumps({"num_devices": 2}))
    (tmp / "s-opsnotlist.json").write_text(json.dumps({"num_devices": 2, "ops": {"a": 1}}))
    for k, (text, _, _) in CONFIGS.items():
        (tmp / f"cfg-{k}.yaml").write_text(text)
    (tmp / "cfg-ok.yaml").write_text("cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]\n"
                                     "machines: [cpu-host]\nplanners: [normal]\n")
    for name, text in (("garbage", "not json\n{\"a\": 1\n"), ("listrows", "[1, 2]\n[3]\n")):
        (tmp / name).mkdir(exist_ok=True)
        (tmp / name / "rows.jsonl").write_text(text)
    (tmp / "nonutf8rows").mkdir(exist_ok=True)
    (tmp / "nonutf8rows" / "rows.jsonl").write_bytes(b'{"id": "\xff"}\n')
    # a real results folder for the report cases
    (tmp / "results").mkdir(exist_ok=True)
    make_files3(tmp)


# -- fixtures of round three -----------------------------------------------------------------------
def _link(target, at):
    at = Path(at)
    if at.is_symlink() or at.exists():
        return
    at.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(str(target), str(at))


def _fifo(at):
    at = Path(at)
    if not at.exists():
        at.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(str(at))


def _sparse(at, size=3 * 10**9):
    with open(at, "wb") as f:
        f.truncate(size)  # a 3 GB file that takes no disk space


def _outside(tmp, name, text="precious data outside the output folder\n"):
    """A file outside every output folder, and its SHA-256 (for the unchanged-checks)."""
    import hashlib

    d = Path(tmp) / "outside"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(text)
    (d / (name + ".sha256")).write_text(hashlib.sha256(p.read_bytes()).hexdigest())
    return p


def make_cache_files(tmp: Path) -> None:
    """The compile slot's cache folder as a link, its lock as a link/FIFO/folder, a file."""
    (tmp / "outside" / "cache-target").mkdir(parents=True, exist_ok=True)
    _link(tmp / "outside" / "cache-target", tmp / "cc-folder-link")
    (tmp / "cc-lock-link").mkdir(exist_ok=True)
    _link(_outside(tmp, "cc-lock-link.txt"), tmp / "cc-lock-link" / "compile.lock")
    _fifo(tmp / "cc-lock-fifo" / "compile.lock")
    (tmp / "cc-lock-folder" / "compile.lock").mkdir(parents=True, exist_ok=True)
    (tmp / "cc-not-a-folder").write_text("a file where the cache folder should be\n")


def make_files3(tmp: Path) -> None:
    tmp = Path(tmp)
    make_cache_files(tmp)
    for p, (base, _size) in PROFILE_PARAMS.items():
        for k, v in PROFILE_VALUES.items():
            (tmp / f"prof-{p}-{k}.yaml").write_text(f"extends: {base}\nparams:\n  {p}: {v}\n")
    for k, v in (("alpha_s", "1e308"), ("bandwidth_Bps", "0"), ("latency_s", ".nan"), ("latency_s", "-1")):
        (tmp / f"prof-ov-{k}-{v.strip('.')}.yaml").write_text(
            f"extends: dgx-h100\ncollectives:\n  all_gather: {{{k}: {v}}}\n")
    chain = [tmp / f"chain-{i}.yaml" for i in range(1500)]
    for i, c in enumerate(chain):
        c.write_text(f"extends: {chain[i + 1] if i + 1 < len(chain) else 'cpu-host'}\n")
    (tmp / "pf-chain1500.yaml").write_text(f"extends: {chain[0]}\n")
    (tmp / "pf-cycle.yaml").write_text(f"extends: {tmp / 'pf-cycle-b.yaml'}\n")
    (tmp / "pf-cycle-b.yaml").write_text(f"extends: {tmp / 'pf-cycle.yaml'}\n")
    _sparse(tmp / "pf-sparse3g.yaml")
    _fifo(tmp / "pf-fifo.yaml")
    (tmp / "pf-folder.yaml").mkdir(exist_ok=True)
    _link("/dev/zero", tmp / "pf-devzero-link.yaml")
    (tmp / "pf-nonmapping.yaml").write_text("- 1\n- 2\n")
    (tmp / "pf-pytag.yaml").write_text("name: !!python/object/apply:os.system ['true']\n")
    (tmp / "pf-deep.yaml").write_text("extends: cpu-host\nparams: " + "[" * 3000 + "]" * 3000 + "\n")
    (tmp / "pf-unknown-key.yaml").write_text("extends: cpu-host\nspeed: 3\n")
    (tmp / "pf-bom.yaml").write_bytes(b"\xef\xbb\xbfextends: cpu-host\n")
    # schedules
    op = {"kind": "all_gather", "in_bytes": 4, "out_bytes": 8, "send_bytes": 4, "recv_bytes": 4,
          "groups": [[0, 1]], "label": ""}
    base = {"name": "s", "num_devices": 2, "meta": {}, "ops": [op, op]}

    def s3(name, meta=None, text=None, **top):
        d = json.loads(json.dumps(base))
        if meta is not None:
            d["meta"] = meta
        d.update(top)
        (tmp / f"s3-{name}.json").write_text(text if text is not None else json.dumps(d))

    for k, m in (("meta-initial-abc", {"initial_bytes": "abc"}), ("meta-initial-1e30", {"initial_bytes": 1e30}),
                 ("meta-initial-list", {"initial_bytes": [1]}), ("meta-initial-neg", {"initial_bytes": -5}),
                 ("meta-initial-bool", {"initial_bytes": True}), ("meta-itemsize-list", {"itemsize": [4]}),
                 ("meta-itemsize-1e40", {"itemsize": 1e40}), ("meta-itemsize-0", {"itemsize": 0}),
                 ("meta-itemsize-65", {"itemsize": 65}), ("meta-mesh-int", {"mesh": 5}), ("meta-not-object", [1]),
                 ("meta-ok", {"initial_bytes": 4, "itemsize": 4, "mesh": "x=2", "note": "kept"})):
        s3(k, m)
    s3("ops-over-cap")
    s3("ids-over-cap")
    good = json.dumps(base)
    s3("nan-bytes", text=good.replace('"in_bytes": 4', '"in_bytes": NaN', 1))
    s3("inf-bytes", text=good.replace('"in_bytes": 4', '"in_bytes": Infinity', 1))
    with open(tmp / "s3-ops-86mb.json", "w") as f:  # 2,000,000 tiny ops, 86 MB
        f.write('{"num_devices": 2, "ops": [' + '{"kind":"copy","in_bytes":0,"out_bytes":0},' * 1_999_999
                + '{"kind":"copy","in_bytes":0,"out_bytes":0}]}')
    _fifo(tmp / "s3-fifo.json")
    _sparse(tmp / "s3-sparse3g.json")
    _link("/dev/zero", tmp / "s3-devzero-link.json")
    # simulator validate --data
    row = ('{id: a, system: "s", profile: "dgx-h100:1", collective: all_gather, devices: 8, '
           'size_bytes: 1048576, time_s: 0.001, source: "x"}')
    for k, text in (("empty", ""), ("list", "- 1\n"), ("rows-not-list", "rows: 5\n"), ("row-not-mapping", "rows: [5]\n"),
                    ("zero-time", "rows: [" + row.replace("time_s: 0.001", "time_s: 0") + "]\n"),
                    ("zero-size", "rows: [" + row.replace("size_bytes: 1048576", "size_bytes: 0") + "]\n"),
                    ("zero-devices", "rows: [" + row.replace("devices: 8", "devices: 0") + "]\n"),
                    ("unknown-key", "rows: [" + row.replace("id: a,", "id: a, speed: 3,") + "]\n"),
                    ("bad-profile", "rows: [" + row.replace("dgx-h100:1", "nope:1") + "]\n"),
                    ("nan-time", "rows: [" + row.replace("time_s: 0.001", "time_s: .nan") + "]\n"),
                    ("neg-size", "rows: [" + row.replace("size_bytes: 1048576", "size_bytes: -5") + "]\n"),
                    ("huge-devices", "rows: [" + row.replace("devices: 8", "devices: 1000000000") + "]\n"),
                    ("str-size", "rows: [" + row.replace("size_bytes: 1048576", "size_bytes: big") + "]\n")):
        (tmp / f"v-{k}.yaml").write_text(text)
    _fifo(tmp / "v-fifo.yaml")
    _sparse(tmp / "v-sparse3g.yaml")
    (tmp / "v-nonutf8.yaml").write_bytes(b"rows: [\xff]\n")
    # run folders: .lock / rows.jsonl replaced by a link, FIFO, folder
    for f in (".lock", "rows.jsonl"):
        for k in ("link", "fifo", "folder", "devzero-link", "dangling-link"):
            n = f"rf-{f.strip('.')}-{k}"
            d = tmp / n
            d.mkdir(exist_ok=True)
            if k == "link":
                _link(_outside(tmp, f"{n}.txt"), d / f)
            elif k == "fifo":
                _fifo(d / f)
            elif k == "folder":
                (d / f).mkdir(exist_ok=True)
            elif k == "devzero-link":
                _link("/dev/zero", d / f)
            else:
                _link(tmp / "outside" / f"{n}-never-created", d / f)
    for k in ("link", "fifo", "folder", "devzero-link"):
        d = tmp / f"rr-{k}"
        d.mkdir(exist_ok=True)
        if k == "link":
            _link(_outside(tmp, "rr-rows.jsonl", '{"id": "a"}\n'), d / "rows.jsonl")
        elif k == "fifo":
            _fifo(d / "rows.jsonl")
        elif k == "folder":
            (d / "rows.jsonl").mkdir(exist_ok=True)
        else:
            _link("/dev/zero", d / "rows.jsonl")
    for w in ("trace", "chrome", "codegen"):
        _link(_outside(tmp, f"w-{w}-link.txt"), tmp / f"w-{w}-link")
        _fifo(tmp / f"w-{w}-fifo")
    _fifo(tmp / "cfg3-fifo.yaml")
    _sparse(tmp / "cfg3-sparse3g.yaml")
    _link("/dev/zero", tmp / "cfg3-devzero-link.yaml")
    (tmp / "cfg3-folder-yaml.yaml").mkdir(exist_ok=True)
    # the app's results root: links and a FIFO inside it
    root = tmp / "approot"
    (root / "r-link").mkdir(parents=True, exist_ok=True)
    _link(_outside(tmp, "app-rows.jsonl", '{"id": "a", "status": "ok"}\n'), root / "r-link" / "rows.jsonl")
    _link(tmp / "garbage", root / "r-dirlink")
    (root / "r-fifo").mkdir(exist_ok=True)
    _fifo(root / "r-fifo" / "rows.jsonl")
    (root / "cal-link").mkdir(exist_ok=True)
    _link(_outside(tmp, "cal.json", '{"name": "x", "params": {}}'), root / "cal-link" / "x.json")
    (root / "cal-md").mkdir(exist_ok=True)
    (root / "cal-md" / "x.json").write_text(json.dumps({
        "name": "[click](http://evil.example)", "description": "![x](http://evil.example/p.png) www.evil.example",
        "params": {}}))


#: ports of the worker's own listeners for the Ray cases ({silent_port}, {http_port}, {closed_port})
PORTS: dict[str, int] = {}


def start_listeners() -> None:
    """A listener that accepts and never answers, one that answers HTTP/1.1, and a closed port."""
    import socket
    import threading

    def serve(sock, reply):
        held = []
        while True:
            try:
                c, _ = sock.accept()
            except OSError:
                return
            if reply:
                try:
                    c.sendall(reply)
                except OSError:
                    pass
            held.append(c)

    for name, reply in (("silent_port", None), ("http_port", b"HTTP/1.1 400 Bad Request\r\n\r\n")):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        PORTS[name] = s.getsockname()[1]
        threading.Thread(target=serve, args=(s, reply), daemon=True).start()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    PORTS["closed_port"] = s.getsockname()[1]
    s.close()


def _api_cases3(tmp):
    import models
    from synth import ArrayType, Mesh, Plan, Schedule, refine

    op = {"kind": "all_gather", "in_bytes": 4, "out_bytes": 8, "groups": [[0, 1]]}
    plan = {"mesh": {"x": 2}, "src": "[4{x}]", "dst": "[4]", "steps": []}
    names12 = [f"a{i}" for i in range(12)]

    def sched(**kw):
        d = {"num_devices": 2, "ops": [dict(op)]}
        d.update(kw)
        return lambda: Schedule.from_dict(d)

    def plan_(**kw):
        d = dict(plan)
        d.update(kw)
        return lambda: Plan.from_dict(d)

    def deep(n):
        v = []
        for _ in range(n):
            v = [v]
        return v

    def mesh_shapes():
        from ui.scenario import mesh_shapes

        keep = ",".join(f"a{i}=2" for i in range(12))
        r = mesh_shapes(names12, 4096, keep=keep)
        import math

        _must(len(r) <= 1000 and keep in r and all(
            math.prod(int(p.split("=")[1]) for p in m.split(",")) == 4096 for m in r))

    def fit_mesh():
        from ui.scenario import fit_mesh

        _must(fit_mesh(names12, [2] * 12, 4096) == ",".join(f"a{i}=2" for i in range(12)))
        import math

        got = fit_mesh(names12, [2] * 12, 2048)
        _must(math.prod(int(p.split("=")[1]) for p in got.split(",")) == 2048)

    def escape():
        import re

        from ui.errors import escape_md

        raw = re.compile(r"\]\(|(?<!\\)!\[|(?<!\\)<|(?<!\\)://|www\.|(?<!\\)\$|:red\[")
        for t in LINK_TEXT.values():
            _must(not raw.search(escape_md(f"mesh {t!r}: not a mesh")))
        _must(escape_md("[8192{data}, 32768{model}] P('data', None)") == "[8192{data}, 32768{model}] P('data', None)")

    def guard(kind):
        def run():
            from executor.run import compile_guard

            if kind == "guard-cpu-over-budget":
                old = os.environ.get("REDIST_MEMORY_BUDGET_BYTES")
                os.environ["REDIST_MEMORY_BUDGET_BYTES"] = "1e9"
                try:
                    with compile_guard("case [8{x}] -> [8]", "cpu", 512 << 20):
                        raise AssertionError("the compile ran")
                finally:
                    if old is None:
                        os.environ.pop("REDIST_MEMORY_BUDGET_BYTES", None)
                    else:
                        os.environ["REDIST_MEMORY_BUDGET_BYTES"] = old
            elif kind == "guard-resource-exhausted":
                with compile_guard("case [8{x}] -> [8]", "tpu:v4"):
                    raise RuntimeError("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
                                       "memory space hbm. Used 72.03G of 31.25G hbm. Exceeded hbm capacity by 40.78G.")
            elif kind == "guard-aot-over-budget":
                old = os.environ.get("REDIST_MEMORY_BUDGET_BYTES")
                os.environ["REDIST_MEMORY_BUDGET_BYTES"] = "1e8"
                try:
                    with compile_guard("case [8{x}] -> [8]", "tpu-v4:2x2x2", devices=8):
                        raise AssertionError("the compile ran")
                finally:
                    if old is None:
                        os.environ.pop("REDIST_MEMORY_BUDGET_BYTES", None)
                    else:
                        os.environ["REDIST_MEMORY_BUDGET_BYTES"] = old
            elif kind == "guard-hbm-used":
                with compile_guard("case [8{x}] -> [8]", "tpu-v5e:4x4", devices=16):
                    raise RuntimeError("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. The total memory "
                                       "required for HLO temporaries (96.00G) exceeds available HBM (15.75G).")
            elif kind == "killed-line":
                from executor.run import killed_line

                line = killed_line("case [8{x}] -> [8] on x=8", "tpu-v4:2x2x2", 3 << 30, -9)
                _must("\n" not in line and "killed by signal 9, most likely for memory" in line
                      and "3.00 GiB" in line and "tpu-v4:2x2x2" in line and "-9" not in line)
                line = killed_line("case", "cpu", None, 137)  # a shell's 128 + 9
                _must("signal 9" in line and "needs about" not in line)
            elif kind == "join-timeout-values":
                from executor.distributed import ExecutorError, join_timeout_s

                _must(join_timeout_s("2.5") == 2.5 and join_timeout_s(600) == 600.0)
                for bad in ("0", "0.5", "601", "inf", "-inf", "nan", "x", "", "1e999"):
                    try:
                        join_timeout_s(bad)
                    except ExecutorError as e:
                        _must("\n" not in str(e) and "between 1 and 600" in str(e))
                    else:
                        raise AssertionError(f"join deadline {bad!r} accepted")
            elif kind == "guard-memoryerror":
                with compile_guard("case [8{x}] -> [8]", "cpu", 1 << 20):
                    raise MemoryError()
            else:
                try:
                    with compile_guard("case", "cpu", 1 << 20):
                        raise KeyError("not a memory failure")
                except KeyError:
                    return  # passed through unchanged
                raise AssertionError("a non-memory error was rewritten")
        return run

    return {
        "profile-ramp": lambda: models.load_profile(f"{tmp}/prof-ramp_ranks_exponent-1e308.yaml:1"),
        "profile-chain": lambda: models.load_profile(f"{tmp}/pf-chain1500.yaml:8"),
        "schedule-none": lambda: Schedule.from_dict(None), "schedule-list": lambda: Schedule.from_dict([]),
        "schedule-ops-str": sched(ops="abc"), "schedule-op-str": sched(ops=["x"]),
        "schedule-op-kind": sched(ops=[dict(op, kind=5)]), "schedule-bytes-str": sched(ops=[dict(op, in_bytes="4")]),
        "schedule-groups-int": sched(ops=[dict(op, groups=5)]), "schedule-devices-str": sched(num_devices="2"),
        "schedule-meta-list": sched(meta=[1]),
        "schedule-pairs-bad": sched(ops=[{"kind": "permute", "in_bytes": 4, "out_bytes": 4, "pairs": [[0]]}]),
        "plan-steps-str": plan_(steps="ab"), "plan-steps-int": plan_(steps=5), "plan-step-str": plan_(steps=["x"]),
        "plan-step-dim-str": plan_(steps=[{"op": "all_gather", "dim": "a", "axis": "x"}]),
        "plan-mesh-list": plan_(mesh=[1]), "plan-mesh-str-bad": plan_(mesh="x="), "plan-src-int": plan_(src=5),
        "plan-planner-list": plan_(planner=[]), "plan-itemsize-str": plan_(itemsize="4"),
        "plan-steps-deep": plan_(steps=deep(5000)),
        "from-spec-unreduced-int": lambda: ArrayType.from_spec((8,), ("x",), unreduced=5),
        "from-spec-unreduced-list-int": lambda: ArrayType.from_spec((8,), ("x",), unreduced=[1]),
        "refine-subaxis-3x4": lambda: refine(Mesh.parse("x=8"), names=["x:(3)4"]),
        "refine-subaxis-0": lambda: refine(Mesh.parse("x=8"), names=["x:(0)4"]),
        "refine-subaxis-unknown": lambda: refine(Mesh.parse("x=8"), names=["q:(1)2"]),
        "refine-ok": lambda: _must(refine(Mesh.parse("x=8"), names=["x:(2)4"])[0].size == 8),
        "ui-mesh-shapes-12-axes": mesh_shapes, "ui-fit-mesh-12-axes": fit_mesh, "ui-escape-md": escape,
        **{f"compile-{k}": guard(k) for k in ("guard-cpu-over-budget", "guard-resource-exhausted",
                                               "guard-memoryerror", "guard-other-error", "guard-aot-over-budget",
                                               "guard-hbm-used", "killed-line", "join-timeout-values")},
    }


def _fill_text(a, tmp):
    a = a.replace("{tmp}", str(tmp))
    for k, v in PORTS.items():
        a = a.replace("{" + k + "}", str(v))
    return a


def _fill(argv, tmp):
    return type(argv)(_fill_text(a, tmp) if isinstance(a, str) else a for a in argv)


# -- the worker: runs the in-process cases -------------------------------------------------------
class Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise Hang()


def _one_line_error(err: str) -> tuple[bool, str]:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback" in err:
        return False, "traceback on stderr"
    if len(lines) != 1:
        return False, f"{len(lines)} lines on stderr"
    return True, ""


def run_cli_case(surface, argv):
    import importlib

    main = importlib.import_module(f"{surface}.cli").main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:  # --help
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return rc, out.getvalue(), err.getvalue()


#: an internal call named in a user-facing message (``ArrayType.parse('...')``, ``load_profile(...)``)
INTERNAL_NAME = re.compile(
    r"\b(ArrayType|Mesh|Plan|Schedule|ScheduleOp)(\.\w+)?(\(|: )|"
    r"\b(parse_type|parse_partition_spec|load_profile|synthesize|from_dict|with_scale)(\(|: )")


def judge_cli(rc, err, expect, match, out="", argv=()):
    if expect == "ok":
        return (rc == 0 and "Traceback" not in err), f"rc={rc} err={err[-300:]!r}"
    ok, why = _one_line_error(err)
    if rc != 2:
        return False, f"exit {rc}, not 2; stderr {err[-300:]!r}"
    if not ok:
        return False, why + f": {err[-300:]!r}"
    if INTERNAL_NAME.search(err):
        return False, f"the message names an internal function: {err.strip()[:300]!r}"
    if "--json" in argv:  # the error is also one JSON object on stdout
        try:
            doc = json.loads(out)
        except ValueError:
            return False, f"--json: stdout is not one JSON document: {out[-200:]!r}"
        if not (isinstance(doc, dict) and set(doc) == {"error", "kind"}
                and "error: " + doc["error"] == err.strip()):
            return False, f"--json: stdout {out[-200:]!r} is not {{error, kind}} matching stderr"
    if match and match.lower() not in err.lower():
        return False, f"message does not name {match!r}: {err.strip()[:300]!r}"
    return True, err.strip()[:300]


def run_api_case(key, expect):
    from synth.errors import RedistributionError

    fns = {k: fn for k, fn, _ in _api_cases()}
    fns.update(_api_cases3(API_TMP))
    try:
        fns[key]()
    except RedistributionError as e:
        msg = str(e)
        if expect == "ok":
            return False, f"raised {msg[:200]!r}"
        if "\n" in msg:
            return False, f"message of {len(msg.splitlines())} lines"
        return True, msg[:300]
    except Exception as e:  # noqa: BLE001 - the point: anything else is a bug
        return False, f"{type(e).__name__} outside RedistributionError: {str(e)[:200]}"
    return (expect == "ok"), "no error raised"


_APP = {}
API_TMP = None
#: markdown that would render as a link, image, URL, formula or colour (unescaped)
RAW_MARKDOWN = re.compile(r"\]\(|(?<!\\)!\[|(?<!\\)<|(?<!\\)://|www\.|(?<!\\)\$|:red\[")


def run_app_case(target, expect):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if target is not None and target[0] == "url":  # a shared link: fields in the URL
        for k, v in target[1].items():
            at.query_params[k] = v
        at.run()
        if target[2]:
            at.switch_page(target[2]).run()
        target = None
    elif target is not None and target[0] == "page":
        at.run()
        at.switch_page(target[1]).run()
        at.text_input(key=target[2]).set_value(target[3]).run()
        target = None
    else:
        at.run()
    if target is not None:
        if len(target) == 3:
            page, key, value = target
            at.switch_page(page).run()
        else:
            key, value = target
        at.text_input(key=key).set_value(value).run()
    if at.exception:
        return False, "exception: " + str(at.exception[0].message)[:300]
    errors = [e.value for e in at.error]
    shown = errors + [w.value for w in at.warning] + [m.value for m in at.markdown if "evil.example" in str(m.value)]
    raw = [m for m in shown if RAW_MARKDOWN.search(str(m))]
    if raw:  # user text must be shown as typed, never rendered as markdown
        return False, f"unescaped markdown shown: {str(raw[0])[:200]!r}"
    if expect == "ok":
        return (not errors), f"errors shown: {errors[:1]}"
    if expect == "shown":  # a file's own text, shown as typed
        return True, f"{len(shown)} texts, none rendered as markdown"
    if expect == "warning":
        warns = [str(w.value) for w in at.warning]
        return bool(warns), f"warnings: {warns[:2]}"
    if not errors:
        return False, "no error shown"
    return True, str(errors[0])[:300]


def worker(out_path: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
    make_files(tmp)
    start_listeners()
    global API_TMP
    API_TMP = tmp
    os.environ.setdefault("MPLBACKEND", "Agg")
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGPROF, _alarm)
    results = {}
    only = os.environ.get("HOSTILE_ONLY")
    if any(c[2] == "app" and (not only or only in c[0]) for c in CASES):
        run_app_case(None, "ok")  # warm-up: imports and caches, not charged to the first case
    for cid, cls, surface, target, expect, match in CASES:
        if only and only not in cid:
            continue
        if os.environ.get("HOSTILE_VERBOSE"):
            print(f"case {cid}", file=sys.__stderr__, flush=True)
        saved = {k: os.environ.get(k) for k in ENVS.get(cid, {})}
        os.environ.update({k: _fill_text(v, tmp) for k, v in ENVS.get(cid, {}).items()})
        t0, c0 = time.perf_counter(), time.process_time()
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        signal.setitimer(signal.ITIMER_PROF, RUNAWAY_CPU_S)
        try:
            if surface in ("synth", "simulator", "executor", "experiments"):
                argv = _fill(target, tmp)
                rc, out, err = run_cli_case(surface, argv)
                ok, why = judge_cli(rc, err, expect, match, out, argv)
            elif surface == "api":
                ok, why = run_api_case(target, expect)
            elif surface == "app":
                filled = target
                if target and target[0] == "url":
                    filled = ("url", {k: _fill_text(v, tmp) for k, v in target[1].items()}, target[2])
                elif target:
                    filled = _fill(target, tmp)
                ok, why = run_app_case(filled, expect)
                if ok and match and match.lower() not in why.lower():
                    ok, why = False, f"message does not name {match!r}: {why}"
            else:
                continue
        except Hang:
            cpu = time.process_time() - c0
            ok, why = False, (f"runaway: over {RUNAWAY_CPU_S:.0f} s of CPU" if cpu >= RUNAWAY_CPU_S * 0.99
                              else f"hang: over {HANG_S:.0f} s")
        except BaseException as e:  # noqa: BLE001 - a traceback is a failed case
            import traceback

            ok, why = False, "uncaught " + "".join(traceback.format_exception_only(e)).strip()[:300]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if ok and cid in POSTS:
            ok, post_why = POSTS[cid](tmp)
            why = why if ok else post_why
        results[cid] = {"ok": ok, "why": why, "class": cls, "surface": surface, "expect": expect,
                        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                        "peak_after_bytes": _own_peak_bytes()}
    peak = _own_peak_bytes()
    Path(out_path).write_text(json.dumps({"results": results, "peak_rss_bytes": peak}))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)  # the fixtures (an 86 MB schedule among them); links are not followed


def _own_peak_bytes() -> int:
    """This process's own peak resident memory: ``VmHWM`` of /proc/self/status. (Linux's
    ``ru_maxrss`` is carried over ``execve`` from the forking parent, so a worker started by
    a large pytest process would report the parent's size.)"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_worker(timeout=1200) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "results.json"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("XLA_FLAGS", None)
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(out)], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0 or not out.exists():
            raise AssertionError(f"the corpus worker failed (exit {r.returncode}): {r.stderr[-2000:]}")
        return json.loads(out.read_text())


#: Runs one command and writes its peak memory (the only child's ru_maxrss, KiB) to a file,
#: so that each case's peak is its own, not the largest of the test session's children.
_PEAK_WRAPPER = ("import resource, subprocess, sys\n"
                 "rc = subprocess.run(sys.argv[2:]).returncode\n"
                 "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
                 "sys.exit(rc)\n")


def run_subprocess_case(argv, tmp):
    """``(exit status or None if it hung, stdout, stderr, wall seconds, peak bytes)``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)
    peak_file = Path(tmp) / f"peak-{os.getpid()}-{time.monotonic_ns()}"
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), sys.executable, "-m",
                            *_fill(argv, tmp)], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=HANG_S + 20)  # + the interpreter's and JAX's start-up on a loaded host
    except subprocess.TimeoutExpired:
        return None, "", "", time.perf_counter() - t0, None
    peak = int(peak_file.read_text()) * 1024 if peak_file.exists() else None
    return r.returncode, r.stdout, r.stderr, time.perf_counter() - t0, peak


def summary(data: dict) -> str:
    from collections import Counter

    res = data["results"]
    by_class = Counter(r["class"] for r in res.values())
    by_surface = Counter(r["surface"] for r in res.values())
    failed = [k for k, r in res.items() if not r["ok"]]
    lines = [f"hostile corpus: {len(res)} in-process cases + {len(SUB)} subprocess cases = "
             f"{len(res) + len(SUB)}; failed {len(failed)}; peak memory "
             f"{data['peak_rss_bytes'] / 1e9:.2f} GB (limit {MEMORY_LIMIT_BYTES / 1e9:.0f} GB)",
             "by class:   " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())),
             "by surface: " + ", ".join(f"{k} {v}" for k, v in sorted(by_surface.items())),
             "slowest (wall, loaded host): " + ", ".join(f"{k} {r['wall_s']:.1f} s" for k, r in
                                                 sorted(res.items(), key=lambda kv: -kv[1]["wall_s"])[:5]),
             f"most CPU (limit {RUNAWAY_CPU_S:.0f} s): " + ", ".join(
                 f"{k} {r.get('cpu_s', 0):.1f} s" for k, r in
                 sorted(res.items(), key=lambda kv: -kv[1].get("cpu_s", 0))[:5])]
    prev, grew = 0, []
    for k, r in res.items():  # the cases that raised the worker's peak memory the most
        after = r.get("peak_after_bytes", 0)
        if after > prev:
            grew.append((after - prev, k))
            prev = after
    lines.append("peak memory grew most in: " + ", ".join(
        f"{k} +{b / 1e9:.2f} GB" for b, k in sorted(grew, reverse=True)[:3]))
    lines += [f"  FAILED {k}: {res[k]['why']}" for k in failed]
    return "\n".join(lines)


# -- pytest ----------------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # pragma: no cover - the worker needs no pytest
    pytest = None

if pytest is not None and __name__ != "__main__":

    @pytest.fixture(scope="module")
    def corpus():
        return run_worker()

    def test_corpus_size_and_memory(corpus):
        n = len(corpus["results"]) + len(SUB)
        assert n >= 700, n  # issue 22: every surface of round three
        assert corpus["peak_rss_bytes"] < MEMORY_LIMIT_BYTES, summary(corpus)
        hangs = [k for k, r in corpus["results"].items() if r["why"].startswith("hang")]
        assert not hangs, hangs

    @pytest.mark.parametrize("cid", [c[0] for c in CASES])
    def test_in_process_case(corpus, cid):
        r = corpus["results"][cid]
        assert r["ok"], f"{cid}: {r['why']}"

    @pytest.fixture(scope="module")
    def sub_tmp(tmp_path_factory):
        tmp = tmp_path_factory.mktemp("hostile-sub")
        make_files(tmp)
        return tmp

    @pytest.mark.parametrize("cid, argv, expect", SUB, ids=[s[0] for s in SUB])
    def test_subprocess_case(sub_tmp, cid, argv, expect):
        rc, out, err, wall, peak = run_subprocess_case(argv, sub_tmp)
        assert rc is not None, f"{cid}: hung (no exit within {HANG_S + 20:.0f} s)"
        if expect == "ok":
            assert rc == 0 and "Traceback" not in err, err[-500:]
        else:
            ok, why = _one_line_error(err)
            assert rc == 2 and ok, f"exit {rc}: {why}: {err[-500:]!r}"
        assert peak is not None and peak < MEMORY_LIMIT_BYTES, f"{cid}: peak memory {peak} bytes"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "--summary":
        print(summary(run_worker()))
        with tempfile.TemporaryDirectory() as d:
            make_files(Path(d))
            bad, walls, peaks = [], [], []
            for cid, argv, expect in SUB:
                rc, out, err, wall, peak = run_subprocess_case(argv, d)
                walls.append(wall)
                peaks.append(peak or 0)
                good = rc == 0 if expect == "ok" else (rc == 2 and _one_line_error(err)[0])
                if not good:
                    bad.append(f"{cid} (exit {rc}: {err.strip()[-200:]!r})")
            print(f"subprocess sample: {len(SUB)} cases, failed {len(bad)}; slowest {max(walls):.1f} s "
                  f"(interpreter start-up included); largest peak memory {max(peaks) / 1e9:.2f} GB")
            for b in bad:
                print("  FAILED " + b)
    else:
        print(__doc__)
