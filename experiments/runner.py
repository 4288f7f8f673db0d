"""The resumable parallel runner.

``run(config, out_dir)`` executes every work unit of a config and appends each unit's
rows to ``OUT/rows.jsonl`` (flushed and fsynced) as soon as the unit finishes. Rows
are keyed by id (the hash of the row's canonical spec), so a rerun after a kill skips
every id already in the journal and the results hold each row exactly once.
``results.csv`` and ``results.parquet`` are rewritten from the journal at the end of
every run. One run at a time owns a folder: ``OUT/.lock`` (``fcntl.flock``, released
by the kernel when the run ends or dies) makes a second run stop with a clear error.

Two engines run the units; the driver (journal, resume, error rows, progress bar) is
the same for both:

* ``local`` (default): a ``concurrent.futures.ProcessPoolExecutor`` (spawn) on this
  machine. The library reports dead workers (``BrokenProcessPool``) and cancels
  queued units on Ctrl-C; a unit past ``timeout_s`` is stopped by killing its worker
  (the pool is then replaced and the other units in flight are resubmitted).
* ``ray``: each unit is a Ray task (``num_cpus=1``, no retries) on an existing cluster
  (``address``) or on a local Ray started and stopped with the run. A task past
  ``timeout_s`` is cancelled with ``ray.cancel(force=True)``; a crashed worker gives
  error rows.

JAX's CPU device count is fixed when its backend starts, so a worker that has run an
XLA unit for N devices only takes XLA units for N devices: the local engine gives each
device count its own pool (units are ordered by device count); on Ray, each count's
tasks carry their own ``runtime_env`` and so get their own workers.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from experiments.backends import needs_jax
from experiments.case import ExperimentError
from experiments.worker import ROW_FIELDS, error_rows

JOURNAL = "rows.jsonl"


# -- journal -------------------------------------------------------------------------------
def read_journal(out_dir, inside=None) -> dict[str, dict]:
    """Rows by id (the last line for an id wins); a torn last line is ignored. Read line by
    line through synth.fileio.iter_lines: ``rows.jsonl`` must be a regular file (a link,
    FIFO or folder in its place is refused in one line, never followed, never waited on),
    each line at most 1 MiB, the file at most the ``rows_bytes`` limit. With ``inside``
    (the app's results root) no link below that folder is followed either."""
    from synth.fileio import FileError, iter_lines

    path = Path(out_dir) / JOURNAL
    rows: dict[str, dict] = {}
    if not os.path.lexists(path):
        return rows
    try:
        for _, line in iter_lines(path, "results file", inside=inside):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a line cut by a kill; its unit is rerun
            if isinstance(r, dict) and "id" in r:
                rows[r["id"]] = r
    except FileError as e:
        raise ExperimentError(str(e)) from None
    return rows


class Journal:
    """``OUT/rows.jsonl``, appended to (flushed and fsynced per batch). Opened without
    following a link (``O_NOFOLLOW``) and refused unless a regular file, so a link placed
    there never lets a run truncate or append to a file outside ``--out``."""

    def __init__(self, out_dir):
        from synth.fileio import FileError, open_for_append

        self.path = Path(out_dir) / JOURNAL
        try:
            self._repair()
            self.f = open_for_append(self.path, "--out (rows.jsonl)")
        except FileError as e:
            raise ExperimentError(str(e)) from None

    def _repair(self):
        """Cut a torn last line (from a kill mid-write) so appends start on a new line.
        Reads backwards from the end in 64 KiB blocks (constant memory)."""
        from synth.fileio import open_for_update

        if not os.path.lexists(self.path):
            return
        with open_for_update(self.path, "--out (rows.jsonl)") as f:
            end = f.seek(0, os.SEEK_END)
            if end == 0:
                return
            f.seek(end - 1)
            if f.read(1) == b"\n":
                return
            pos = end
            while pos > 0:
                step = min(1 << 16, pos)
                pos -= step
                f.seek(pos)
                block = f.read(step)
                k = block.rfind(b"\n")
                if k >= 0:
                    f.truncate(pos + k + 1)
                    return
            f.truncate(0)

    def append(self, rows: list[dict]):
        self.f.write("".join(json.dumps(r, default=_json_default) + "\n" for r in rows))
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self):
        try:
            self.f.close()
        except OSError:  # a failed flush (disk full) was already reported by append
            pass


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
    from synth.fileio import atomic_write_text, atomic_writer

    # unique temporary names in the folder, then os.replace: readers never see a torn table
    atomic_write_text(csv, df.to_csv(index=False), "--out (results.csv)")
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
    with atomic_writer(pq, "--out (results.parquet)", mode="wb") as f:
        pdf.to_parquet(f, index=False)
    return {"csv": str(csv), "parquet": str(pq), "rows": len(df)}


# -- engines ---------------------------------------------------------------------------------
def backends_default_compile() -> tuple:
    from experiments.backends import DEFAULT_COMPILE

    return DEFAULT_COMPILE


#: Our planners compiled by the machines' compilers in this run (``runner.compile``): their
#: units start JAX, so they run in workers whose JAX has the case's device count.
_COMPILE_PLANNERS: tuple = ()


def _jax_count(unit) -> int | None:
    profiles = [m.profile for _, m, _ in unit.rows]
    compiles = unit.planner in _COMPILE_PLANNERS or unit.planner == "shardy-r2c"
    return unit.case.num_devices if compiles or needs_jax(unit.planner, unit.measure, profiles) else None


_PIDQ = None  # in a local pool's worker: where it says which task it runs


def _task(unit, opts, task_id=None):
    """One unit in a worker (local pool or Ray): its rows."""
    if _PIDQ is not None:
        _PIDQ.put((task_id, os.getpid()))
    from experiments import backends
    from experiments.worker import run_unit

    global _COMPILE_PLANNERS
    _COMPILE_PLANNERS = tuple(opts.get("compile_planners", backends.DEFAULT_COMPILE))
    n = _jax_count(unit)
    if n is not None and os.environ.get("REDIST_WORKER_DEVICES") in (None, str(n)):
        os.environ["REDIST_WORKER_DEVICES"] = str(n)
        backends.set_worker_devices(n)
    return run_unit(unit, opts["xla_max_devices"], opts.get("measure_opts"), opts.get("unit_delay_s", 0.0),
                    opts.get("simulator", "simpy"), opts.get("compile_planners", backends.DEFAULT_COMPILE))


def _init_local_worker(jax_devices, pidq):
    global _PIDQ
    _PIDQ = pidq
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _exit_with_parent()
    if jax_devices is not None:
        from experiments import backends

        os.environ["REDIST_WORKER_DEVICES"] = str(jax_devices)
        backends.set_worker_devices(jax_devices)


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


def _died(unit, detail: str) -> list[dict]:
    return error_rows(unit, "error", f"worker process died ({detail}) while running this unit; out of memory?")


class LocalEngine:
    """Units on a ``ProcessPoolExecutor``, one pool per JAX device count."""

    name = "local"

    def __init__(self, workers: int, opts: dict, timeout_s: float):
        self.ctx = mp.get_context("spawn")
        self.capacity = workers
        self.opts, self.timeout_s = opts, timeout_s
        self.pool = None
        self.jax_devices = None        # the device count the current pool's workers started JAX with
        self.inflight: dict = {}       # future -> (unit, deadline, task_id)
        self.pids: dict = {}           # task_id -> worker pid
        self.strikes: dict = {}        # unit index -> pool breakages it was in flight for
        self.killed: set = set()       # task ids whose worker we killed for a timeout
        self.requeue: list = []
        self.pidq = self.ctx.SimpleQueue()
        self._next = 0

    def _new_pool(self, jax_devices):
        from concurrent.futures import ProcessPoolExecutor

        self._drop_pool()
        self.jax_devices = jax_devices
        self.pool = ProcessPoolExecutor(self.capacity, mp_context=self.ctx, initializer=_init_local_worker,
                                        initargs=(jax_devices, self.pidq))

    def _drop_pool(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

    def busy(self) -> bool:
        return bool(self.inflight)

    def free(self) -> int:
        return self.capacity - len(self.inflight)

    def can_take(self, unit) -> bool:
        n = _jax_count(unit)
        return n is None or self.jax_devices in (None, n) or not self.inflight

    def submit(self, unit):
        n = _jax_count(unit)
        if self.pool is None or (n is not None and self.jax_devices not in (None, n)):
            self._new_pool(n)  # a fresh pool whose workers start JAX with n devices
        elif n is not None:
            self.jax_devices = n  # no worker has started JAX yet: the first unit sets the count
        self._next += 1
        tid = self._next
        fut = self.pool.submit(_task, unit, self.opts, tid)
        self.inflight[fut] = (unit, time.monotonic() + self.timeout_s, tid)

    def poll(self, timeout: float) -> list:
        """Finished units as ``[(unit, rows)]``; units to run again go to ``self.requeue``."""
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        if not self.inflight:
            time.sleep(min(timeout, 0.05))
            return []
        nearest = min(d for _, d, _ in self.inflight.values())
        done, _ = wait(list(self.inflight), timeout=max(0.01, min(timeout, nearest - time.monotonic())),
                       return_when=FIRST_COMPLETED)
        self._read_pids()
        out, broken = [], []
        for fut in done:
            unit, _, tid = self.inflight.pop(fut)
            exc = fut.exception()
            if exc is None:
                out.append((unit, fut.result()))
            elif isinstance(exc, BrokenProcessPool):
                broken.append((unit, tid))
            else:  # run_unit catches everything; this is a pickling or similar failure
                out.append((unit, error_rows(unit, "error", f"{type(exc).__name__}: {exc}")))
        now = time.monotonic()
        for fut, (_unit, deadline, tid) in list(self.inflight.items()):
            if now > deadline and not fut.done():
                pid = self.pids.get(tid)
                if pid is not None and tid not in self.killed:
                    self.killed.add(tid)
                    _kill(pid)  # the pool breaks; its other units come back as BrokenProcessPool
        if broken:
            # every unit still in flight fails with the pool: collect them all now
            for fut, (unit, _, tid) in list(self.inflight.items()):
                try:
                    fut.exception(timeout=30)
                except Exception:  # noqa: BLE001 - cancelled or still stuck: it goes with the pool
                    pass
                self.inflight.pop(fut)
                broken.append((unit, tid))
            self._settle(broken, out)
            self._new_pool(self.jax_devices)
        return out

    def _settle(self, broken: list, out: list):
        """Which units of a broken pool get rows and which run again. A unit whose worker
        we killed timed out; the others were bystanders, unless nobody was killed: then
        a lone unit is the culprit, and a unit in flight at two breakages is taken to be one."""
        timed_out = [(u, t) for u, t in broken if t in self.killed]
        for u, _ in timed_out:
            out.append((u, error_rows(u, "timeout", f"timed out after {self.timeout_s:g} s "
                                      "(runner.timeout_s); the worker was stopped")))
        rest = [(u, t) for u, t in broken if t not in self.killed]
        if timed_out:
            self.requeue += [u for u, _ in rest]
            return
        for u, _ in rest:
            self.strikes[id(u)] = self.strikes.get(id(u), 0) + 1
            if len(rest) == 1 or self.strikes[id(u)] >= 2:
                out.append((u, _died(u, "the process pool broke")))
            else:
                self.requeue.append(u)

    def _read_pids(self):
        while not self.pidq.empty():
            tid, pid = self.pidq.get()
            self.pids[tid] = pid

    def close(self, cancel: bool = False):
        self._read_pids()
        if cancel:
            for fut, (_, _, tid) in self.inflight.items():
                fut.cancel()
                if tid in self.pids:
                    _kill(self.pids[tid])
        if self.pool is not None:
            self.pool.shutdown(wait=not cancel, cancel_futures=True)
            self.pool = None


def _kill(pid: int):
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[1])


class _native_stderr_to:
    """With ``"quiet"``, collect what native code writes to file descriptor 2 (Ray's
    C++ client logs every retry there) instead of showing it; ``None`` changes nothing."""

    def __init__(self, mode):
        self.mode, self.log, self.saved = mode, {"text": ""}, None

    def __enter__(self):
        if self.mode != "quiet":
            return self.log
        import tempfile

        try:
            self.tmp = tempfile.TemporaryFile(mode="w+b")
            sys.stderr.flush()
            self.saved = os.dup(2)
            os.dup2(self.tmp.fileno(), 2)
        except OSError:
            self.saved = None
        return self.log

    def __exit__(self, *exc):
        if self.saved is not None:
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.tmp.seek(0)
            self.log["text"] = self.tmp.read().decode("utf-8", "replace")
            self.tmp.close()
        return False


#: Where ``ray start --head`` records the address of the cluster it started on this host.
RAY_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"


def _resolve_auto() -> str:
    """``--address auto``: the cluster this host runs (``RAY_ADDRESS``, else the address
    ``ray start --head`` records in /tmp/ray/ray_current_cluster); refused at once when
    there is none, instead of Ray's own search of several minutes."""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env != "auto":
        return env
    from synth.fileio import FileError, read_text

    try:
        text = read_text(RAY_CLUSTER_FILE, "Ray's cluster file", 4096).strip()
    except FileError:
        text = ""
    if not text:
        raise ExperimentError(f"--address auto: no Ray cluster runs on this host (RAY_ADDRESS is unset and "
                              f"{RAY_CLUSTER_FILE} does not exist); start one with 'ray start --head' "
                              "or omit --address for a local Ray")
    return text.splitlines()[0].strip()


def _check_reachable(address: str, timeout_s: float | None = None) -> None:
    """Fail fast (Ray itself retries for minutes) when nothing answers at ``address``, or
    when what answers is not a Ray head: a Ray head's GCS (and Ray Client) speak gRPC, so
    an HTTP/2 client preface gets a SETTINGS frame back. Each step has a deadline of
    ``timeout_s`` (the ``connect_s`` limit, 10 s by default)."""
    import socket

    from synth.limits import LimitError, limit, parse_address

    if address == "local":
        return
    timeout_s = float(limit("connect_s")) if timeout_s is None else timeout_s
    try:
        host, port = parse_address(address, "--address")
    except LimitError as e:
        raise ExperimentError(f"{e} (the head's GCS address that 'ray start --head' prints, or ray://HOST:PORT)") \
            from None
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            # the HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113 section 3.4)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            head = b""
            while len(head) < 9:
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError:
        raise ExperimentError(f"--address {address}: something accepts connections at {host}:{port} but does not "
                              f"answer like a Ray head within {timeout_s:g} s (REDIST_LIMIT_CONNECT_S); check the "
                              "address ('ray start --head' prints it)") from None
    except (OSError, UnicodeError) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        raise ExperimentError(f"--address {address}: nothing answers at {host}:{port} ({why}); start a Ray "
                              "head there ('ray start --head') or omit --address for a local Ray") from None
    if len(head) < 9 or head[3] != 4:
        raise ExperimentError(f"--address {address}: what answers at {host}:{port} is not a Ray head (no gRPC "
                              "reply); check the address ('ray start --head' prints it)")


@contextlib.contextmanager
def _deadline(seconds: float, what: str):
    """Raise :class:`ExperimentError` when the block runs past ``seconds`` (SIGALRM; main
    thread only -- elsewhere the block runs without one)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, fire)
    t0 = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)  # an enclosing alarm, if any
    try:
        yield
    except _Timeout:
        raise ExperimentError(f"{what} did not finish within {seconds:g} s; check the cluster, or omit --address "
                              "for a local Ray") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer > 0:  # give the enclosing alarm back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer - (time.monotonic() - t0)))


class _Timeout(BaseException):
    pass


def _keep_sigterm(handler):
    """Put our SIGTERM handler back after Ray installed its own (a polite kill must still
    stop the run and its tasks)."""
    import signal
    import threading

    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


class RayEngine:
    """Each unit is a Ray task; a local Ray (``num_cpus``) or an existing cluster."""

    name = "ray"

    def __init__(self, opts: dict, timeout_s: float, address: str | None = None, num_cpus: int = 2,
                 primary_devices: int | None = None):
        if address == "auto":  # checked before Ray is imported (seconds on a busy host)
            address = _resolve_auto()
        if address is not None:
            _check_reachable(address)
        import ray

        self.ray = ray
        self.opts, self.timeout_s = opts, timeout_s
        self.started_here = address is None
        env = {"env_vars": {"JAX_PLATFORMS": "cpu", "PYTHONPATH": _repo_root()}}
        if address is not None:
            # the project's packages travel with the job; their dependencies must be installed
            # on the cluster's nodes (requirements.txt)
            import executor  # noqa: E401
            import experiments
            import models
            import simulator
            import synth

            env = {"env_vars": {"JAX_PLATFORMS": "cpu"},
                   "py_modules": [m.__path__[0] for m in (synth, models, simulator, executor, experiments)]}
        self.base_env = env
        import signal

        ours = signal.getsignal(signal.SIGTERM)
        from synth.limits import limit

        # joining a cluster ships the project's packages first: 6 connection deadlines
        wait_s = 6.0 * limit("connect_s") if address is not None else 120.0
        try:
            with _native_stderr_to(None if address is None else "quiet") as log:
                if address is None:
                    # "local": always a new Ray of our own, never a cluster left running on this host
                    with _deadline(wait_s, "starting a local Ray"):
                        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                                 log_to_driver=False, configure_logging=True, logging_level="ERROR",
                                 runtime_env=env, object_store_memory=256 << 20)  # small objects only
                else:
                    with _deadline(wait_s, f"joining the Ray cluster at {address}"):
                        ray.init(address=address, log_to_driver=False, logging_level="ERROR", runtime_env=env)
            _keep_sigterm(ours)
        except ExperimentError:
            _keep_sigterm(ours)
            raise
        except (SystemExit, KeyboardInterrupt) as e:  # a stop while Ray started (Ray's SIGTERM
            _keep_sigterm(ours)                       # handler calls sys.exit(15)): no orphans left
            with contextlib.suppress(Exception):
                ray.shutdown()
            if isinstance(e, KeyboardInterrupt) or e.code == signal.SIGTERM:
                raise KeyboardInterrupt from None  # the CLI's clean stop: "interrupted", status 130
            raise
        except Exception as e:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError ...
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            where = f"--address {address}" if address else "a local Ray"
            hint = ("start a head with 'ray start --head' and pass its address, or omit --address")
            if "auth" in log.get("text", "").lower() or "auth" in msg.lower():
                hint = ("the cluster wants token authentication: set RAY_AUTH_MODE=token (and RAY_AUTH_TOKEN, "
                        "or copy ~/.ray/auth_token, from the head) before running")
            raise ExperimentError(f"{where}: could not start or join Ray ({msg[:200]}); {hint}") from None
        self.capacity = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.fn = ray.remote(num_cpus=1, max_retries=0)(_task)
        self.inflight: dict = {}  # ObjectRef -> (unit, deadline)
        self.requeue: list = []
        # XLA units for the commonest device count run in the default workers (which start
        # JAX on their first such unit); other counts get workers of their own
        self.primary = primary_devices

    def busy(self) -> bool:
        return bool(self.inflight)

    def free(self) -> int:
        return self.capacity - len(self.inflight)

    def can_take(self, unit) -> bool:
        return True

    def submit(self, unit):
        n = _jax_count(unit)
        opts = {}
        if n is not None and n != self.primary:  # workers for another device count are separate
            env = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.base_env.items()}
            env["env_vars"]["REDIST_WORKER_DEVICES"] = str(n)
            env["env_vars"]["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
            opts["runtime_env"] = env
        ref = self.fn.options(**opts).remote(unit, self.opts)
        self.inflight[ref] = (unit, time.monotonic() + self.timeout_s)

    def poll(self, timeout: float) -> list:
        ray = self.ray
        if not self.inflight:
            time.sleep(min(timeout, 0.05))
            return []
        nearest = min(d for _, d in self.inflight.values())
        ready, _ = ray.wait(list(self.inflight), num_returns=1,
                            timeout=max(0.01, min(timeout, nearest - time.monotonic())))
        if ready:  # take everything that is done, not just one
            ready, _ = ray.wait(list(self.inflight), num_returns=len(self.inflight), timeout=0)
        out = []
        for ref in ready:
            unit, _ = self.inflight.pop(ref)
            try:
                out.append((unit, ray.get(ref)))
            except ray.exceptions.TaskCancelledError:
                out.append((unit, error_rows(unit, "timeout", f"timed out after {self.timeout_s:g} s "
                                             "(runner.timeout_s); the task was cancelled")))
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as e:
                out.append((unit, _died(unit, type(e).__name__)))
            except ray.exceptions.RayError as e:
                msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                out.append((unit, error_rows(unit, "error", f"ray task failed: {msg[:300]}")))
        now = time.monotonic()
        for ref, (unit, deadline) in list(self.inflight.items()):
            if now > deadline:
                ray.cancel(ref, force=True)
                self.inflight.pop(ref)
                out.append((unit, error_rows(unit, "timeout", f"timed out after {self.timeout_s:g} s "
                                             "(runner.timeout_s); the task was cancelled")))
        return out

    def close(self, cancel: bool = False):
        ray = self.ray
        if cancel:
            for ref in self.inflight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass
        ray.shutdown()


ENGINES = ("local", "ray")


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
    engine: str = "local"
    tables: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run(config, out_dir, workers: int | None = None, progress: bool = True,
        retry_errors: bool = False, limit: int | None = None, engine: str = "local",
        address: str | None = None) -> RunSummary:
    """Run ``config`` into ``out_dir`` (created if needed); resume if it has rows.

    ``engine`` is ``"local"`` (a process pool of ``workers``) or ``"ray"`` (Ray tasks on
    the cluster at ``address``, or on a local Ray of ``workers`` CPUs started for this run)."""
    t0 = time.monotonic()
    if engine not in ENGINES:
        raise ExperimentError(f"--engine {engine!r}: use one of {list(ENGINES)}")
    if address is not None and engine != "ray":
        raise ExperimentError("--address is for --engine ray (the Ray cluster to join)")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out {out_dir}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExperimentError(f"--out {out_dir}: cannot create the folder ({e.strerror})") from None
    with FolderLock(out):
        _save_config(config, out)
        done = read_journal(out)
        if retry_errors:
            done = {k: v for k, v in done.items() if v.get("status") == "ok"}
        units = config.units()
        todo = [u for u in units if not all(i in done for i in u.ids)]
        summary = RunSummary(str(out), units_total=len(units), units_skipped=len(units) - len(todo))
        summary.engine = engine
        if limit is not None:
            todo = todo[:limit]
        n = max(1, min(workers or config.workers, len(todo) or 1))
        opts = {
            "xla_max_devices": config.xla_max_devices,
            "unit_delay_s": float(config.runner.get("unit_delay_s", 0.0)),
            "simulator": config.runner.get("simulator", "simpy"),
            "compile_planners": tuple(config.runner.get("compile", backends_default_compile())),
            "measure_opts": {k: config.measure[k] for k in ("warmup", "repeats") if k in config.measure},
        }
        global _COMPILE_PLANNERS
        _COMPILE_PLANNERS = opts["compile_planners"]
        journal = Journal(out)
        bar = None
        try:
            if todo:
                if engine == "ray":
                    counts = [_jax_count(u) for u in todo if _jax_count(u) is not None]
                    primary = max(set(counts), key=counts.count) if counts else None
                    eng = RayEngine(opts, config.timeout_s, address, num_cpus=workers or 2,
                                    primary_devices=primary)
                else:
                    eng = LocalEngine(n, opts, config.timeout_s)
                bar = _progress(len(todo), config.name, progress)
                _drive(todo, eng, journal, bar, summary, done)
        finally:
            journal.close()
            if bar is not None:
                bar.close()
        try:
            summary.tables = write_tables(out)
        except OSError as e:
            raise ExperimentError(f"--out {out_dir}: cannot write the results tables ({e.strerror}); the rows "
                                  "are safe in rows.jsonl: free space and rerun the same command") from None
    summary.rows_total = summary.tables["rows"]
    summary.wall_s = time.monotonic() - t0
    return summary


class FolderLock:
    """``OUT/.lock``, held (``fcntl.flock``) while a run writes to ``OUT``; the kernel
    releases it when the run ends, however it ends, so a killed run leaves no stale lock."""

    def __init__(self, out: Path):
        self.path = out / ".lock"
        self.f = None

    def __enter__(self):
        import fcntl

        from synth.fileio import FileError, open_lock_file

        try:  # never through a link, never a FIFO or folder (one line, the target untouched)
            self.f = open_lock_file(self.path, f"--out {self.path.parent}: lock file")
        except FileError as e:
            raise ExperimentError(str(e)) from None
        try:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.seek(0)
            who = self.f.read().strip() or "another process"
            self.f.close()
            raise ExperimentError(f"--out {self.path.parent}: another run ({who}) is writing to this folder; "
                                  "wait for it to finish, or use another --out") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"pid {os.getpid()} on {os.uname().nodename}")
        self.f.flush()
        return self

    def __exit__(self, *exc):
        self.f.close()  # closing releases the lock
        return False


def _save_config(config, out: Path):
    meta = {"name": config.name, "path": config.path, "description": config.description,
            "planners": list(config.planners), "machines": [m.profile for m in config.machines],
            "cases": len(config.cases), "python": sys.version.split()[0]}
    from synth.fileio import atomic_write_text, read_text

    atomic_write_text(out / "run.json", json.dumps(meta, indent=2), "--out (run.json)")
    if config.path and Path(config.path).exists():
        atomic_write_text(out / "config.yaml", read_text(config.path, "config file"), "--out (config.yaml)")


def _drive(todo, eng, journal, bar, summary, done):
    """Feed units to the engine as it has room, and record every finished unit's rows."""
    pending = list(todo)
    cancel = True
    try:
        while pending or eng.busy() or eng.requeue:
            if eng.requeue:
                pending[:0] = eng.requeue
                eng.requeue = []
            while pending and eng.free() > 0:
                k = next((i for i, u in enumerate(pending) if eng.can_take(u)), None)
                if k is None:
                    break  # the next units need workers for another JAX device count: let these drain
                eng.submit(pending.pop(k))
            for unit, rows in eng.poll(1.0):
                _record(unit, rows, journal, bar, summary, done)
        cancel = False
    finally:
        eng.close(cancel=cancel)


def _record(unit, rows, journal, bar, summary, done):
    # Only rows this run still needs (with --retry-errors a unit may hold ok rows).
    want = set(unit.ids) - set(done)
    rows = [r for r in rows if r["id"] in want]
    try:
        journal.append(rows)
    except OSError as e:
        raise ExperimentError(f"cannot append to {journal.path} ({e.strerror}); the rows written so far "
                              "are intact: free space and rerun the same command to resume") from None
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


def _progress(total, name, enabled):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=f"{name}", unit="unit", file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)
