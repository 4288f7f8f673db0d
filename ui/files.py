"""Results and files: the results root (nothing outside it is listed, read or
written), sweep folders and their rows, the HTML report, and the calibrated profiles
with their reports. Every file read has a size cap and is checked to be what it says.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import streamlit as st

from ui.errors import InputError

# -- sweeps (experiments results folders) ----------------------------------------------------
REPO_ROOT = Path(__file__).resolve().parents[1]


def results_root():
    """The folder the Sweeps and Calibration pages may read and write under:
    ``APP_RESULTS_ROOT`` if set, else the repository (where only ``results*/`` folders
    count). Nothing outside it is listed, read or written."""
    import os
    from pathlib import Path

    env = os.environ.get("APP_RESULTS_ROOT", "").strip()
    return Path(env).resolve() if env else REPO_ROOT


def _inside(path, root) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check_results_path(text: str, what: str = "results folder"):
    """The real path of a typed folder, if it lies under :func:`results_root` (and, for
    the default root, under a ``results*`` folder); else a one-line :class:`InputError`."""
    import os
    from pathlib import Path

    root = results_root()
    raw = Path(os.path.expanduser(str(text).strip()))
    p = (raw if raw.is_absolute() else root / raw).resolve()
    default = not os.environ.get("APP_RESULTS_ROOT", "").strip()
    ok = _inside(p, root) and (not default or (p != root and p.relative_to(root).parts[0].startswith("results")))
    if not ok:
        where = f"{root}/results*/" if default else f"{root}/"
        raise InputError(f"{what} {str(text).strip()!r}: the app only reads and writes folders under "
                         f"{where} (set APP_RESULTS_ROOT to change this)")
    return p


def results_folders(root=None, limit: int = 50) -> list[str]:
    """Results folders (holding ``rows.jsonl``) under the results root, newest first."""
    from pathlib import Path

    root = Path(root) if root else results_root()
    default = root == REPO_ROOT
    found = set()
    pats = ("results*/rows.jsonl", "results*/*/rows.jsonl", "results*/*/*/rows.jsonl") if default else \
        ("rows.jsonl", "*/rows.jsonl", "*/*/rows.jsonl", "*/*/*/rows.jsonl")
    for pattern in pats:
        found.update(p.parent for p in root.glob(pattern)
                     if not p.is_symlink() and _inside(p.resolve(), root.resolve()))
    ordered = sorted(found, key=_mtime, reverse=True)
    return [str(p) for p in ordered[:limit]]


def _mtime(path) -> float:
    """Modification time of a results folder's ``rows.jsonl`` (0 if it is gone)."""
    import os

    try:
        return os.stat(os.path.join(path, "rows.jsonl")).st_mtime
    except OSError:
        return 0.0


@st.cache_data(show_spinner=False, max_entries=16)
def _sweep_rows(path: str, mtime: float):
    report = importlib.import_module("experiments.report")
    return report.load_rows(path)


def sweep_rows(path: str):
    """The rows of a results folder as a DataFrame (``experiments.report.load_rows``);
    reloaded when ``rows.jsonl`` changes. Only folders under the results root, and the
    bundled example (shipped read-only with the app)."""
    if Path(path).resolve() == EXAMPLE_DIR:
        return _sweep_rows(str(EXAMPLE_DIR), _mtime(str(EXAMPLE_DIR)))
    p = str(check_results_path(path))
    fileio = importlib.import_module("synth.fileio")
    try:  # no link below the results root, rows.jsonl a regular file (read without following a link)
        fileio.check_inside(f"{p}/rows.jsonl", results_root(), "results file")
    except fileio.FileError as e:
        raise InputError(str(e)) from None
    return _sweep_rows(p, _mtime(p))


def build_sweep_report(path: str) -> str:
    """(Re)write ``report.html`` of a results folder (under the results root only);
    returns its path."""
    report = importlib.import_module("experiments.report")
    return report.build_report(str(check_results_path(path))).html_path


# -- calibration ---------------------------------------------------------------------------
def calibrated_dir() -> str:
    try:
        return str(importlib.import_module("models.profiles").CALIBRATED_DIR)
    except Exception:  # noqa: BLE001
        from pathlib import Path

        return str(Path(__file__).resolve().parents[1] / "models" / "profiles" / "calibrated")


def check_calibration_dir(text: str):
    """The calibrated-profiles folder, if it is the shipped one or lies under the
    results root; else a one-line :class:`InputError`."""
    import os
    from pathlib import Path

    shipped = Path(calibrated_dir()).resolve()
    raw = Path(os.path.expanduser(str(text).strip() or str(shipped)))
    p = (raw if raw.is_absolute() else REPO_ROOT / raw).resolve()
    if p == shipped or _inside(p, shipped):
        return p
    try:
        return check_results_path(str(p), "Calibrated profiles folder")
    except InputError:
        raise InputError(f"Calibrated profiles folder {str(text).strip()!r}: the app only reads {shipped} "
                         f"and folders under {results_root()} (set APP_RESULTS_ROOT to change this)") from None


def calibrated_profiles(folder: str) -> list[str]:
    """Calibrated profile files (``*.json`` that are not ``*.report.json``) in ``folder``."""

    d = check_calibration_dir(folder)
    if not d.is_dir():
        return []
    import itertools

    from synth.limits import limit

    cap = limit("options")  # a folder of a million files must not build a million options
    found = (p for p in d.glob("*.json") if not p.name.endswith(".report.json"))  # a link: refused on read
    return sorted(str(p) for p in itertools.islice(found, 10 * cap))[:cap]


@st.cache_data(show_spinner=False, max_entries=32)
def _read_json(path: str, mtime: float) -> dict:
    """A JSON object from a file; any other content is a one-line :class:`InputError`."""
    from pathlib import Path

    name = Path(path).name
    fileio = importlib.import_module("synth.fileio")
    try:  # a regular file only, size-capped; a link in its place is not followed
        raw = fileio.read_bytes(path, name, follow_links=False)
    except fileio.FileError as e:
        raise InputError(str(e).replace(f"{name} {path}", name)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name} is not UTF-8 text (byte {e.start}); is it a calibrated profile?") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise InputError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{name} holds a JSON {type(doc).__name__}, not an object; a calibrated profile "
                         "is an object with 'name' and 'params'")
    return doc


def read_calibration(profile_path: str) -> tuple[dict, dict | None]:
    """``(profile, report or None)`` for a calibrated profile file; the report is the
    ``*.report.json`` written next to it by ``executor calibrate``."""
    import os
    from pathlib import Path

    p = Path(profile_path)
    check_calibration_dir(str(p.parent))
    if not p.is_file():
        raise InputError(f"calibrated profile {profile_path} does not exist")
    prof = _read_json(str(p), os.stat(p).st_mtime)
    rp = p.with_name(p.stem + ".report.json")
    rep = _read_json(str(rp), os.stat(rp).st_mtime) if rp.is_file() else None
    return prof, rep


# -- the smoke sweep and the bundled example ------------------------------------------------
#: The config the Sweeps page offers to run on a fresh clone.
SMOKE_CONFIG = "experiments/configs/smoke.yaml"
#: A small sweep shipped with the app (read only), shown until a sweep is run.
EXAMPLE_DIR = Path(__file__).resolve().parent / "example_sweep"
EXAMPLE_NOTE = ("the smoke sweep (experiments/configs/smoke.yaml) as run on the 2-core development VM on "
                "2026-12-01, shipped in ui/example_sweep/. Its measured CPU times are that machine's; "
                "run the sweep to see your own.")


def smoke_out_dir() -> Path:
    """Where the page's smoke sweep writes: ``results/smoke`` (under ``APP_RESULTS_ROOT``
    when set)."""
    root = results_root()
    return root / ("results/smoke" if root == REPO_ROOT else "smoke")


# -- calibrated profiles: fit quality and implausible values --------------------------------
#: A fitted bandwidth at or above this is the fit's cap (the data set no limit): no link
#: of any machine this tool models comes near it (NVLink 5 is 1.8e12 B/s per GPU).
CAP_BPS = 1e14
#: Below this a fitted bandwidth is slower than any interconnect modelled (1 MB/s).
MIN_BPS = 1e6
#: Above this a fitted latency or launch cost is longer than any collective's start-up.
MAX_LATENCY_S = 0.1


def _fitted(v):
    v = v.get("value") if isinstance(v, dict) else v
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def calibration_flags(prof: dict) -> list[dict]:
    """Fitted values no real machine has, each ``{"scope", "parameter", "value", "why"}``:
    a bandwidth at the fit's cap (``>= CAP_BPS``: the fit found no limit, e.g. 1e15 B/s =
    1,000,000 GB/s), below ``MIN_BPS``, faster than the profile's own device memory
    (``hbm_bandwidth_Bps``: a CPU 'link' is a memory copy), a latency above
    ``MAX_LATENCY_S``, or a time fitted to exactly 0 (not identifiable from the data)."""
    params = prof.get("params") or {}
    hbm = _fitted(params.get("hbm_bandwidth_Bps"))
    out = []

    def check(scope, name, raw):
        v = _fitted(raw)
        if v is None:
            return
        why = None
        if name.endswith("_Bps"):
            if v >= CAP_BPS:
                why = (f"{v / 1e9:,.0f} GB/s is at the fit's cap: the measurements set no limit, so this "
                       "parameter is not identified (no link is this fast)")
            elif v < MIN_BPS:
                why = f"{v:.3g} B/s is slower than any interconnect"
            elif hbm and name != "hbm_bandwidth_Bps" and scope in ("machine",) and v > 10 * hbm:
                why = (f"{v / 1e9:,.3g} GB/s is over 10x the device memory bandwidth it copies through "
                       f"({hbm / 1e9:,.3g} GB/s)")
        elif name.endswith("_s"):
            if v > MAX_LATENCY_S:
                why = f"{v:.3g} s is longer than any collective's start-up"
            elif v == 0 and ("alpha" in name or "latency" in name or "overhead" in name):
                why = "fitted to 0: the measurements do not constrain it (not identifiable)"
        if why:
            out.append({"scope": scope, "parameter": name, "value": v, "why": why})

    for name, raw in params.items():
        check("machine", name, raw)
    for kind, entry in (prof.get("collectives") or {}).items():
        if isinstance(entry, dict):
            for name, raw in entry.items():
                check(kind, name, raw)
    return out


def calibration_overview(paths: list[str]) -> list[dict]:
    """One row per calibrated profile file: its name, backend, held-out and fit error,
    points fitted and how many values :func:`calibration_flags` flags. A file that does
    not read gives a row with its one-line error."""
    rows = []
    for p in paths:
        try:
            prof, rep = read_calibration(p)
        except InputError as e:
            rows.append({"profile": Path(p).stem, "error": str(e)})
            continue
        cal = prof.get("calibration") if isinstance(prof.get("calibration"), dict) else {}
        rep = rep if isinstance(rep, dict) else {}
        fit = rep.get("fit") if isinstance(rep.get("fit"), dict) else {}
        fit_mape = _fitted(fit.get("mape")) if fit else _fitted(cal.get("fit_mape"))
        rows.append({
            "profile": str(prof.get("name", Path(p).stem)),
            "backend": f"{cal.get('backend', rep.get('backend', '?'))} x{cal.get('devices', rep.get('devices', '?'))}",
            "held-out MAPE %": _fitted(rep.get("mape")),
            "fit MAPE %": None if fit_mape is None else 100 * fit_mape,
            "fit max error %": None if _fitted(cal.get("fit_max_rel_err")) is None
            else 100 * _fitted(cal.get("fit_max_rel_err")),
            "points fitted": cal.get("points", fit.get("points")),
            "implausible values": len(calibration_flags(prof)),
            "error": "",
        })
    return rows
