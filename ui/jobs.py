"""Long work off the Streamlit script thread: one worker process per job.

A page asks for a result by *key* (the scenario and knobs it depends on). Work whose
estimate is below :data:`INLINE_S` runs inline (and is cached by the caller); anything
longer becomes a :class:`Job`: a fresh process forked from a preloaded fork server,
which reports progress through a pipe and sends its result back when done. The page
shows the estimate, the progress and a Cancel button while the job runs, and reruns
when it ends. Jobs are shared: two sessions asking for the same key wait on one job,
and the finished result is kept (:data:`KEEP_RESULTS` of them) for every session.

A job stops when

* every session that asked for it pressed Cancel or asked for something else
  (a session owns at most one job per page),
* every such session went away (tab closed; checked every :data:`REAP_EVERY_S`),
* it runs longer than :data:`MAX_JOB_S`, or its process exceeds
  :data:`WORKER_MEMORY_BYTES` of address space (it then fails with a message).

At most :data:`MAX_RUNNING` jobs run at once (the rest wait, and say so), so one
session's simulation never takes every core from the others. Stopping a job is
``SIGTERM`` then ``SIGKILL`` after :data:`KILL_GRACE_S`.
"""

from __future__ import annotations

import importlib
import itertools
import multiprocessing as mp
import os
import threading
import time
import traceback
from dataclasses import dataclass, field

#: Estimated seconds under which work runs inline in the script thread.
INLINE_S = 1.0
#: A job running longer than this is stopped with a message.
MAX_JOB_S = float(os.environ.get("APP_MAX_JOB_S", 600))
#: Jobs running at once (the others wait in order).
MAX_RUNNING = int(os.environ.get("APP_MAX_JOBS", max(2, min(4, (os.cpu_count() or 2) - 1))))
#: Address-space limit of a worker process (RLIMIT_AS).
WORKER_MEMORY_BYTES = int(os.environ.get("APP_WORKER_MEMORY_BYTES", 8 * 2**30))
#: Finished results kept for every session.
KEEP_RESULTS = 16
#: How often the reaper checks sessions, deadlines and the queue.
REAP_EVERY_S = 0.5
#: SIGTERM -> SIGKILL grace.
KILL_GRACE_S = 0.5

_PRELOAD = ["synth", "models", "simulator", "ui.work", "plotly.graph_objects", "pandas",
            "ui._warm_worker"]  # the last one runs a tiny simulation: workers start warm


# -- the worker process ----------------------------------------------------------------
def _worker_main(conn, func: str, args: tuple, mem_bytes: int):
    """Runs in the worker: ``func`` is ``module:name``; it is called with ``args`` and a
    ``progress(done, total, text)`` callback."""
    try:
        import resource

        soft = min(mem_bytes, resource.getrlimit(resource.RLIMIT_AS)[1]) \
            if resource.getrlimit(resource.RLIMIT_AS)[1] > 0 else mem_bytes
        resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
    except (ImportError, ValueError, OSError):
        pass
    try:  # `kill -USR1 PID` prints the worker's stack (for diagnosing a slow job)
        import faulthandler
        import signal

        faulthandler.register(signal.SIGUSR1)
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    last = [0.0]

    def progress(done, total, text=""):
        now = time.monotonic()
        if now - last[0] >= 0.2 or done >= total:
            last[0] = now
            conn.send(("progress", float(done), float(total), str(text)))

    try:
        mod, name = func.split(":")
        out = getattr(importlib.import_module(mod), name)(*args, progress=progress)
        conn.send(("done", out))
    except MemoryError:
        conn.send(("error", f"the work needed more than {WORKER_MEMORY_BYTES / 2**30:.0f} GiB of "
                            "memory (the app's per-job limit) and was stopped; try a smaller case", True))
    except ValueError as e:  # RedistributionError is a ValueError: a user error, one line
        conn.send(("error", str(e), True))
    except BaseException as e:  # noqa: BLE001 - report, never a traceback on the page
        conn.send(("error", f"{type(e).__name__}: {e}", False, traceback.format_exc()))
    finally:
        conn.close()


_CTX = None
_CTX_LOCK = threading.Lock()


def _context():
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            try:
                ctx = mp.get_context("forkserver")
                ctx.set_forkserver_preload(_PRELOAD)
            except ValueError:  # no fork server on this platform
                ctx = mp.get_context("spawn")
            _CTX = ctx
        return _CTX


def prestart() -> None:
    """Start the fork server now (it imports :data:`_PRELOAD` and warms up, about 2 s),
    so the first job does not wait for it. Safe to call more than once."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


_MAIN_LOCK = threading.Lock()


def _start_without_main(p) -> None:
    """``p.start()`` without handing the worker this process's ``__main__`` to re-run.

    A fork-server (or spawn) child first re-imports its parent's ``__main__`` module
    (``multiprocessing.spawn.prepare``). While a page runs, Streamlit's ``__main__`` is the
    page's script, ``app.py``: every worker re-ran the whole app in bare mode (its page, its
    plan, even the server's warm-up) beside its job, seconds of CPU taken from the job on a
    2-core machine. The worker needs none of it (its target lives in ``ui.jobs``), so the
    preparation data it is sent leaves the main module out."""
    from multiprocessing import spawn

    with _MAIN_LOCK:
        real = spawn.get_preparation_data

        def prep(name):
            d = real(name)
            d.pop("init_main_from_path", None)
            d.pop("init_main_from_name", None)
            return d

        spawn.get_preparation_data = prep
        try:
            p.start()
        finally:
            spawn.get_preparation_data = real


# -- jobs ------------------------------------------------------------------------------
@dataclass(eq=False)
class Job:
    key: str
    func: str
    args: tuple
    label: str
    estimate_s: float | None
    kind: str = ""              # the estimate's kind of work (``estimate_s``); a finished job updates its rate
    owners: set = field(default_factory=set)
    state: str = "waiting"      # waiting, running, done, error, cancelled
    done: float = 0.0
    total: float = 0.0
    text: str = ""
    result: object = None
    error: str | None = None
    user_error: bool = True
    detail: str = ""
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    ended: float | None = None
    _proc: object = None
    _conn: object = None
    _thread: object = None

    @property
    def finished(self) -> bool:
        return self.state in ("done", "error", "cancelled")

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or time.monotonic()) - self.started

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0


class JobManager:
    """Process-wide registry of jobs (one per server; shared by every session)."""

    def __init__(self):
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._results: dict[str, Job] = {}     # finished ok, most recent last
        self._by_owner: dict[tuple, str] = {}  # (session, slot) -> key
        self._reaper = threading.Thread(target=self._reap_loop, name="app-job-reaper", daemon=True)
        self._reaper.start()
        self._session_alive = _session_alive

    # -- asking ------------------------------------------------------------------------
    def result(self, key: str):
        with self._lock:
            j = self._results.get(key)
            return None if j is None else j.result

    def submit(self, key: str, func: str, args: tuple, *, session: str, slot: str,
               label: str = "", estimate_s: float | None = None, kind: str = "") -> Job:
        """The job for ``key`` (started or queued if needed), owned by ``session``'s
        ``slot``. A session's earlier job in the same slot loses this owner."""
        with self._lock:
            done = self._results.get(key)
            if done is not None:
                self._release(session, slot, keep=key)
                return done
            self._release(session, slot, keep=key)
            j = self._jobs.get(key)
            if j is None or j.finished:
                j = Job(key=key, func=func, args=args, label=label, estimate_s=estimate_s, kind=kind)
                self._jobs[key] = j
            j.owners.add(session)
            self._by_owner[(session, slot)] = key
            self._start_waiting()
            return j

    def get(self, key: str) -> Job | None:
        with self._lock:
            return self._results.get(key) or self._jobs.get(key)

    def cancel(self, session: str, slot: str) -> None:
        """``session`` no longer wants its job in ``slot``; the job stops when nobody does."""
        with self._lock:
            self._release(session, slot)

    def forget(self, key: str) -> None:
        """Drop a finished job (e.g. an error) so that asking again retries it."""
        with self._lock:
            j = self._jobs.get(key)
            if j is not None and j.finished:
                del self._jobs[key]

    def running(self) -> list[Job]:
        with self._lock:
            return [j for j in self._jobs.values() if j.state == "running"]

    def waiting(self) -> list[Job]:
        with self._lock:
            return [j for j in self._jobs.values() if j.state == "waiting"]

    def queue_position(self, job: Job) -> int:
        with self._lock:
            w = sorted((j for j in self._jobs.values() if j.state == "waiting"), key=lambda j: j.created)
            return next((i for i, j in enumerate(w) if j is job), -1) + 1

    def shutdown(self) -> None:
        with self._lock:
            for j in list(self._jobs.values()):
                self._stop(j, "cancelled")

    # -- internals ---------------------------------------------------------------------
    def _release(self, session, slot, keep=None):
        key = self._by_owner.pop((session, slot), None)
        if key is None or key == keep:
            return
        j = self._jobs.get(key)
        if j is None:
            return
        if not any(k for (s, _sl), k in self._by_owner.items() if s == session and k == key):
            j.owners.discard(session)
        if not j.owners and not j.finished:
            self._stop(j, "cancelled")

    def _start_waiting(self):
        running = sum(1 for j in self._jobs.values() if j.state == "running")
        for j in sorted((j for j in self._jobs.values() if j.state == "waiting"), key=lambda j: j.created):
            if running >= MAX_RUNNING:
                break
            self._launch(j)
            running += 1

    def _launch(self, j: Job):
        """Mark ``j`` running and start its worker from the job's own thread: starting a
        process hands it the job's arguments through a pipe (at 4096 devices, schedules of
        megabytes: over a second), and the page that asked must not wait for that to draw
        its progress panel."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker_main, args=(child, j.func, j.args, WORKER_MEMORY_BYTES),
                        name=f"app-job-{j.label or j.func}", daemon=True)
        j._proc, j._conn, j.state, j.started = p, parent, "running", time.monotonic()
        j.text = "starting a worker process"
        j._thread = threading.Thread(target=self._start_and_read, args=(j, child), name="app-job-reader",
                                     daemon=True)
        j._thread.start()

    def _start_and_read(self, j: Job, child):
        p = j._proc
        try:
            _start_without_main(p)
        except Exception as e:  # noqa: BLE001 - cannot fork: say so on the page
            with self._lock:
                if not j.finished:
                    j.state, j.error, j.ended = "error", f"could not start a worker process: {e}", time.monotonic()
                    j.user_error = False
                self._start_waiting()
            return
        finally:
            child.close()
        if j.finished:  # cancelled while it started (``_stop`` saw no live process)
            p.terminate()
            threading.Thread(target=_kill_later, args=(p,), daemon=True).start()
            return
        self._read(j)

    def _read(self, j: Job):
        conn = j._conn
        final = None
        try:
            while True:
                msg = conn.recv()
                if msg[0] == "progress":
                    j.done, j.total, j.text = msg[1], msg[2], msg[3]
                else:
                    final = msg
                    break
        except (EOFError, OSError):
            pass
        proc = j._proc
        if proc is not None:
            proc.join(timeout=5)
        with self._lock:
            if j.finished:  # cancelled meanwhile
                pass
            elif final and final[0] == "done":
                j.result, j.state = final[1], "done"
                self._results[j.key] = j
                while len(self._results) > KEEP_RESULTS:
                    self._results.pop(next(iter(self._results)))
            elif final and final[0] == "error":
                j.state, j.error, j.user_error = "error", final[1], bool(final[2])
                j.detail = final[3] if len(final) > 3 else ""
            else:
                code = proc.exitcode if proc is not None else None
                j.state = "error"
                how = (f"was killed by signal {-code}" if isinstance(code, int) and code < 0
                       else f"ended without a result (exit status {code})")
                j.error = (f"the worker process {how}; most likely it ran out of memory: try a "
                           "smaller array or mesh")
                j.user_error = False
            j.ended = time.monotonic()
            if j.state == "done" and j.kind and isinstance(j.result, dict):
                # the next estimate learns from this run: its units over the time the user
                # waited from the worker's start (process start-up included)
                note_rate(j.kind, j.result.get("units", 0), j.ended - j.started)
            self._start_waiting()
        try:
            conn.close()
        except OSError:
            pass

    def _stop(self, j: Job, state: str, why: str | None = None):
        j.state, j.ended = state, time.monotonic()
        if why:
            j.error = why
        p = j._proc
        if p is not None and p.is_alive():
            p.terminate()
            threading.Thread(target=_kill_later, args=(p,), daemon=True).start()
        self._start_waiting()

    def _reap_loop(self):
        while True:
            time.sleep(REAP_EVERY_S)
            try:
                self._reap()
            except Exception:  # noqa: BLE001 - the reaper must never die
                pass

    def _reap(self):
        with self._lock:
            for (s, slot), _key in list(self._by_owner.items()):
                if not self._session_alive(s):
                    self._release(s, slot)
            now = time.monotonic()
            for j in list(self._jobs.values()):
                if j.state == "running" and j.started and now - j.started > MAX_JOB_S:
                    self._stop(j, "error", f"stopped after {MAX_JOB_S:.0f} s, the app's limit per job "
                                           "(APP_MAX_JOB_S); try a smaller case or the command line")
                if j.finished and j.ended and now - j.ended > 600 and j.state != "done":
                    self._jobs.pop(j.key, None)
            self._start_waiting()


def _kill_later(p):
    p.join(KILL_GRACE_S)
    if p.is_alive():
        p.kill()
        p.join(2)


def _session_alive(session_id: str) -> bool:
    """Whether a Streamlit session is still connected (True outside a server)."""
    if session_id.startswith("local-"):
        return True
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return True
        return Runtime.instance().is_active_session(session_id)
    except Exception:  # noqa: BLE001
        return True


_MANAGER: JobManager | None = None
_MANAGER_LOCK = threading.Lock()


def manager() -> JobManager:
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            _MANAGER = JobManager()
            import atexit

            atexit.register(_MANAGER.shutdown)
        return _MANAGER


_local_ids = itertools.count()


def session_id() -> str:
    """The current Streamlit session's id (a fixed local id outside a script run)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        if ctx is not None:
            # AppTest gives every test session the same id; benchmarks and tests that
            # drive several sessions tell them apart with a tag in session state
            tag = ctx.session_state["_session_tag"] if "_session_tag" in ctx.session_state else ""
            return ctx.session_id + (f"/{tag}" if tag else "")
    except Exception:  # noqa: BLE001
        pass
    return "local-0"


# -- estimates -------------------------------------------------------------------------
#: Work units (device-op participations, ``ui.work.schedule_units``) per second, per
#: kind of work (``simulate``: ``ui.work.simulate_view`` with its figures and trace;
#: ``compare``: ``ui.work.compare_view``), updated from every run this server sees. The
#: seeds are at or below what warm runs took on the 2-core development machine under
#: load: Simulate of the default 64-device scenario 0.3-0.5 s for 192 units, of the
#: 4096-device one with the easy planner about 5 s for 8192 units; Compare of the
#: default scenario 0.07-0.26 s for 352 units.
_RATE = {"simulate": 1000.0, "compare": 2000.0}
#: Seconds every run pays whatever its size (figures, trace, start-up).
_BASE_S = 0.2


def inline_s() -> float:
    """Estimated seconds under which work runs inline (``APP_INLINE_S``, default 1)."""
    try:
        return float(os.environ.get("APP_INLINE_S", INLINE_S))
    except ValueError:
        return INLINE_S


#: Kinds whose rate has learnt from a run on this server (else the estimate is the seed's).
_LEARNT: set = set()


#: Runs shorter than this do not change a rate: their time is mostly fixed costs (and the
#: first-call costs of a cold server), which would make the rate of real work look slow.
LEARN_MIN_S = 1.0


def note_rate(kind: str, units: float, seconds: float) -> None:
    """Fold a finished run of at least :data:`LEARN_MIN_S` into the rate: the first one
    replaces the seed, later ones are averaged in (exponentially, half each)."""
    if units > 0 and seconds >= LEARN_MIN_S:
        r = units / (seconds - _BASE_S)
        _RATE[kind] = 0.5 * _RATE[kind] + 0.5 * r if kind in _LEARNT and kind in _RATE else r
        _LEARNT.add(kind)


def estimate_basis(kind: str) -> str:
    """Where :func:`estimate_s`'s rate comes from, in words for the page."""
    if kind in _LEARNT:
        return "from the rate of earlier runs on this server"
    return "from the rate measured on a busy 2-core machine; this server has not run one yet"


def estimate_s(kind: str, units: float) -> float:
    return _BASE_S + units / _RATE.get(kind, _RATE["simulate"])
