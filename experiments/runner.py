"""The resumable parallel runner.

``run(config, out_dir)`` executes every work unit of a config in worker processes
and appends each unit's rows to ``OUT/rows.jsonl`` (flushed and fsynced) as soon as
the unit finishes. Rows are keyed by id (the hash of the row's canonical spec), so a
rerun after a kill skips every id already in the journal and the results hold each
row exactly once. ``results.csv`` and ``results.parquet`` are rewritten from the
journal at the end of every run.

Workers are plain ``multiprocessing`` processes (spawn), one pipe each, so that a
unit that runs past ``timeout_s`` can be stopped by killing its worker: its rows
are recorded with ``status='timeout'`` and a fresh worker takes its place. A
worker that dies (crash, out of memory) yields ``status='error'`` rows.

JAX's CPU device count is fixed when its backend starts, so a worker that has run
an XLA unit for N devices only takes XLA units for N devices afterwards; units are
ordered by device count and a worker is restarted when the count changes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

from experiments.backends import needs_jax
from experiments.case import ExperimentError
from experiments.worker import ROW_FIELDS, error_rows

JOURNAL = "rows.jsonl"


# -- journal -------------------------------------------------------------------------------
def read_journal(out_dir) -> dict[str, dict]:
    """Rows by id (the last line for an id wins); a torn last line is ignored."""
    path = Path(out_dir) / JOURNAL
    rows: dict[str, dict] = {}
    if not path.exists():
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill; its unit is rerun
            if isinstance(r, dict) and "id" in r:
                rows[r["id"]] = r
    return rows


class Journal:
    def __init__(self, out_dir):
        self.path = Path(out_dir) / JOURNAL
        self._repair()
        self.f = open(self.path, "a")

    def _repair(self):
        """Cut a torn last line (from a kill mid-write) so appends start on a new line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as f:
                f.truncate(cut)

    def append(self, rows: list[dict]):
        self.f.write("".join(json.dumps(r, default=_json_default) + "\n" for r in rows))
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self):
        self.f.close()


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    return str(o)


def write_tables(out_dir) -> dict:
    """``results.csv`` and ``results.parquet`` from the journal. Returns their paths."""
    import pandas as pd

    rows = list(read_journal(out_dir).values())
    df = pd.DataFrame(rows, columns=ROW_FIELDS) if rows else pd.DataFrame(columns=ROW_FIELDS)
    df = df.sort_values(["suite", "case", "machine", "planner", "bandwidth_scale", "latency_scale",
                         "itemsize", "placement"], kind="stable").reset_index(drop=True)
    out = Path(out_dir)
    csv, pq = out / "results.csv", out / "results.parquet"
    tmp = out / ".results.csv.tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, csv)
    # Parquet needs one type per column: mixed object columns become strings.
    pdf = df.copy()
    for col in pdf.columns:
        if pdf[col].dtype == object:
            vals = pdf[col].dropna()
            if len(vals) and not all(isinstance(v, str) for v in vals):
                if all(isinstance(v, bool) for v in vals):
                    pdf[col] = pdf[col].astype("boolean")
                else:
                    pdf[col] = pdf[col].map(lambda v: None if v is None or v != v else str(v))
    tmp = out / ".results.parquet.tmp"
    pdf.to_parquet(tmp, index=False)
    os.replace(tmp, pq)
    return {"csv": str(csv), "parquet": str(pq), "rows": len(df)}


# -- workers ---------------------------------------------------------------------------------
def _worker_main(conn, opts):
    """Worker loop: receive a unit, send back its rows; exit when the parent goes."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _exit_with_parent()
    from experiments import backends
    from experiments.worker import run_unit

    jax_devices = None
    while True:
        try:
            unit = conn.recv()
        except (EOFError, OSError):
            return
        if unit is None:
            return
        if needs_jax(unit.planner, unit.measure) and jax_devices is None:
            jax_devices = unit.case.num_devices
            backends.set_worker_devices(jax_devices)
        rows = run_unit(unit, opts["xla_max_devices"], opts.get("measure_opts"), opts.get("unit_delay_s", 0.0),
                        opts.get("simulator", "simpy"))
        try:
            conn.send(rows)
        except (BrokenPipeError, OSError):
            return


def _exit_with_parent():
    """Stop this worker within a second of its parent dying (even by SIGKILL), instead
    of finishing a long unit nobody will read."""
    import threading

    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


@dataclass
class _Worker:
    proc: object
    conn: object
    jax_devices: int | None = None
    unit: object = None
    started: float = 0.0
    deadline: float = field(default=float("inf"))

    def compatible(self, unit) -> bool:
        if not needs_jax(unit.planner, unit.measure):
            return True
        return self.jax_devices in (None, unit.case.num_devices)


class _Pool:
    def __init__(self, n: int, opts: dict):
        self.ctx = mp.get_context("spawn")
        self.opts = opts
        self.workers = [self._spawn() for _ in range(n)]

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker_main, args=(child, self.opts), daemon=True)
        p.start()
        child.close()
        return _Worker(p, parent)

    def replace(self, w: _Worker) -> _Worker:
        self.kill(w)
        nw = self._spawn()
        self.workers[self.workers.index(w)] = nw
        return nw

    @staticmethod
    def kill(w: _Worker):
        try:
            w.conn.close()
        except OSError:
            pass
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(timeout=5)

    def submit(self, w: _Worker, unit, timeout_s: float):
        if needs_jax(unit.planner, unit.measure):
            w.jax_devices = unit.case.num_devices
        w.unit, w.started, w.deadline = unit, time.monotonic(), time.monotonic() + timeout_s
        w.conn.send(unit)

    def close(self):
        for w in self.workers:
            try:
                if w.unit is None:
                    w.conn.send(None)
            except OSError:
                pass
        for w in self.workers:
            w.proc.join(timeout=2)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(timeout=2)


# -- the run -----------------------------------------------------------------------------------
@dataclass
class RunSummary:
    out_dir: str
    units_total: int = 0
    units_skipped: int = 0
    units_run: int = 0
    rows_written: int = 0
    rows_ok: int = 0
    rows_error: int = 0
    rows_timeout: int = 0
    rows_total: int = 0
    wall_s: float = 0.0
    tables: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run(config, out_dir, workers: int | None = None, progress: bool = True,
        retry_errors: bool = False, limit: int | None = None) -> RunSummary:
    """Run ``config`` into ``out_dir`` (created if needed); resume if it has rows."""
    t0 = time.monotonic()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out {out_dir}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    _save_config(config, out)
    done = read_journal(out)
    if retry_errors:
        done = {k: v for k, v in done.items() if v.get("status") == "ok"}
    units = config.units()
    todo = [u for u in units if not all(i in done for i in u.ids)]
    summary = RunSummary(str(out), units_total=len(units), units_skipped=len(units) - len(todo))
    if limit is not None:
        todo = todo[:limit]
    n = max(1, min(workers or config.workers, len(todo) or 1))
    opts = {
        "xla_max_devices": config.xla_max_devices,
        "unit_delay_s": float(config.runner.get("unit_delay_s", 0.0)),
        "simulator": config.runner.get("simulator", "simpy"),
        "measure_opts": {k: config.measure[k] for k in ("warmup", "repeats") if k in config.measure},
    }
    bar = _progress(len(todo), config.name, progress)
    journal = Journal(out)
    try:
        if todo:
            _drive(todo, n, opts, config.timeout_s, journal, bar, summary, done)
    finally:
        journal.close()
        if bar is not None:
            bar.close()
    summary.tables = write_tables(out)
    summary.rows_total = summary.tables["rows"]
    summary.wall_s = time.monotonic() - t0
    return summary


def _save_config(config, out: Path):
    meta = {"name": config.name, "path": config.path, "description": config.description,
            "planners": list(config.planners), "machines": [m.profile for m in config.machines],
            "cases": len(config.cases), "python": sys.version.split()[0]}
    (out / "run.json").write_text(json.dumps(meta, indent=2))
    if config.path and Path(config.path).exists():
        (out / "config.yaml").write_text(Path(config.path).read_text())


def _drive(todo, n, opts, timeout_s, journal, bar, summary, done):
    pending = list(todo)
    pool = _Pool(n, opts)
    try:
        while pending or any(w.unit is not None for w in pool.workers):
            for w in list(pool.workers):
                if w.unit is not None or not pending:
                    continue
                k = next((i for i, u in enumerate(pending) if w.compatible(u)), None)
                if k is None:
                    w = pool.replace(w)  # wrong JAX device count: start afresh
                    k = 0
                unit = pending.pop(k)
                try:
                    pool.submit(w, unit, timeout_s)
                except OSError:  # the idle worker died: start another and hand it the unit
                    w = pool.replace(w)
                    pool.submit(w, unit, timeout_s)
            busy = [w for w in pool.workers if w.unit is not None]
            now = time.monotonic()
            wait_s = max(0.05, min(w.deadline for w in busy) - now) if busy else 0.05
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=min(wait_s, 1.0))
            for w in busy:
                unit, rows = w.unit, None
                if w.conn in ready:
                    try:
                        rows = w.conn.recv()
                    except (EOFError, OSError):
                        code = w.proc.exitcode
                        rows = error_rows(unit, "error", f"worker process died (exit code {code}) "
                                          "while running this unit; out of memory?")
                        pool.replace(w)
                    else:
                        w.unit = None
                elif w.proc.sentinel in ready or not w.proc.is_alive():
                    rows = error_rows(unit, "error", f"worker process died (exit code {w.proc.exitcode}) "
                                      "while running this unit; out of memory?")
                    pool.replace(w)
                elif time.monotonic() > w.deadline:
                    rows = error_rows(unit, "timeout", f"timed out after {timeout_s:g} s "
                                      "(runner.timeout_s); the worker was stopped")
                    pool.replace(w)
                if rows is None:
                    continue
                # Only rows this run still needs (with --retry-errors a unit may hold ok rows).
                want = set(unit.ids) - set(done)
                rows = [r for r in rows if r["id"] in want]
                journal.append(rows)
                for r in rows:
                    done[r["id"]] = r
                summary.units_run += 1
                summary.rows_written += len(rows)
                for r in rows:
                    key = {"ok": "rows_ok", "timeout": "rows_timeout"}.get(r["status"], "rows_error")
                    setattr(summary, key, getattr(summary, key) + 1)
                if bar is not None:
                    bar.set_postfix_str(f"{unit.planner} {unit.case.name[:28]}  errors={summary.rows_error} "
                                        f"timeouts={summary.rows_timeout}", refresh=False)
                    bar.update(1)
    finally:
        pool.close()


def _progress(total, name, enabled):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=f"{name}", unit="unit", file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)
