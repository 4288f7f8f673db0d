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
    reloaded when ``rows.jsonl`` changes. Only folders under the results root."""
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
        raise InputError(str(e).replace(str(path), name)) from None
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
