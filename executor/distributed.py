"""The executor across processes: ``jax.distributed`` on CPU (gloo over loopback TCP)
or on a cluster whose launcher tells JAX where its coordinator is.

Two roles, one code path:

* **member.** Every process of a multi-process run is a member. It calls
  :func:`initialize` before anything starts JAX's backend, then runs the same
  command (``compare``, ``calibrate``) as a single process would. Process 0 prints
  the result; the others print nothing. Correctness is checked on every process
  (each checks the shards it can address) and gathered to process 0
  (:func:`gather_flags`), so "correct" means bit-exact on every process.
  Where the member learns its place:

  - from the variables :func:`launch` sets (``REDIST_COORDINATOR``,
    ``REDIST_NUM_PROCESSES``, ``REDIST_PROCESS_ID``, ``REDIST_LOCAL_DEVICES``):
    ``jax.distributed.initialize("127.0.0.1:PORT", num_processes=N, process_id=i)``
    with ``devices / N`` CPU devices each and ``jax_cpu_collectives_implementation
    = "gloo"``;
  - with ``--cluster``: ``jax.distributed.initialize()`` with no arguments, which
    finds the coordinator itself under Slurm, Open MPI and on Cloud TPU.

* **launcher.** ``python -m executor compare|calibrate ... --processes N`` on one
  host: :func:`launch` starts N members (``python -m executor <same arguments>``)
  on a free loopback port, relays process 0's output, and stops every member as
  soon as one fails (its own error line, exit status 2). Members die with the
  launcher (``PR_SET_PDEATHSIG``), so no process outlives it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from executor.errors import ExecutorError

ENV_COORD = "REDIST_COORDINATOR"
ENV_NUM = "REDIST_NUM_PROCESSES"
ENV_ID = "REDIST_PROCESS_ID"
ENV_LOCAL = "REDIST_LOCAL_DEVICES"
#: Set in a member whose launcher wants process 0's result as JSON in this file.
ENV_RESULT = "REDIST_RESULT_FILE"

_INITIALIZED = False


# -- members ---------------------------------------------------------------------------------
def is_member() -> bool:
    """True inside a process started by :func:`launch`."""
    return ENV_ID in os.environ


def member_layout() -> tuple[str, int, int, int]:
    """``(coordinator, processes, process id, local devices)`` from the variables
    :func:`launch` sets, each checked: a partial or malformed set (e.g. only
    ``REDIST_PROCESS_ID=0`` left in a shell) is one line naming the variable."""
    from synth.limits import LimitError, limit, parse_address

    names = (ENV_COORD, ENV_NUM, ENV_ID, ENV_LOCAL)
    missing = [n for n in names if not os.environ.get(n, "").strip()]
    if missing:
        raise ExecutorError(f"{ENV_ID} is set but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: "
                            "these variables are set by --processes N for the processes it starts; unset "
                            f"{ENV_ID} to run as one process")
    coord = os.environ[ENV_COORD].strip()
    try:
        parse_address(coord, ENV_COORD)
    except LimitError as e:
        raise ExecutorError(str(e)) from None
    vals = {}
    for n in (ENV_NUM, ENV_ID, ENV_LOCAL):
        v = os.environ[n].strip()
        if not v.isdigit() or len(v) > 9:
            raise ExecutorError(f"{n}={v[:20]!r} must be a non-negative integer (set by --processes N)")
        vals[n] = int(v)
    num, pid, local = vals[ENV_NUM], vals[ENV_ID], vals[ENV_LOCAL]
    if not 1 <= num <= limit("cpu_devices") or not 0 <= pid < num or not 1 <= local <= limit("cpu_devices"):
        raise ExecutorError(f"{ENV_NUM}={num}, {ENV_ID}={pid}, {ENV_LOCAL}={local}: need 1 <= processes, "
                            "0 <= id < processes and >= 1 local device (set by --processes N)")
    return coord, num, pid, local


#: Host memory of one process that starts JAX on CPU, measured (``import jax;
#: jax.devices()``: 268 MB peak RSS with 8 CPU devices, 336 MB with 512, on a loaded host):
#: a process, plus each CPU device, rounded up.
PROCESS_BYTES = 300 << 20
CPU_DEVICE_BYTES = 256 << 10


def check_processes_memory(processes: int, devices: int | None, what: str) -> int:
    """Refuse, before starting anything, ``processes`` JAX processes holding ``devices``
    CPU devices in all when their estimated memory does not fit (the ``available``
    memory, or REDIST_MEMORY_BUDGET_BYTES)."""
    from synth.limits import check_memory

    need = processes * PROCESS_BYTES + (devices or 0) * CPU_DEVICE_BYTES
    check_memory(need, what)
    return need


def check_layout(processes: int, devices: int | None) -> int:
    """Devices per process; raises a user error when ``processes`` does not divide ``devices``."""
    if processes < 1:
        raise ExecutorError(f"--processes {processes}: must be at least 1")
    if devices is None:
        raise ExecutorError(f"--processes {processes} needs --devices (the global device count)")
    if devices < processes or devices % processes:
        raise ExecutorError(f"--processes {processes} does not divide --devices {devices}: each process "
                            f"owns devices/processes CPU devices; pick a divisor of {devices}")
    return devices // processes


#: The join deadline: seconds a member waits for every process of the run to reach the
#: coordinator (``jax.distributed.initialize``). Members start together, so this covers the
#: spread of their start-up times, not the start-up itself. A slow host raises it with
#: ``--join-timeout S`` or ``REDIST_JOIN_TIMEOUT_S``, within ``JOIN_BOUNDS_S``.
ENV_JOIN = "REDIST_JOIN_TIMEOUT_S"
JOIN_DEFAULT_S = 10.0
JOIN_BOUNDS_S = (1.0, 600.0)
#: JAX's own deadline is set this much later than ours, so that our one line comes first
#: (JAX's ends the process with a fatal log and a native stack trace, exit status 134).
_JAX_GRACE_S = 5


def join_timeout_s(value: float | str | None = None, what: str = "--join-timeout") -> float:
    """The join deadline: ``value`` (the flag) if given, else ``REDIST_JOIN_TIMEOUT_S``,
    else 10 s; a finite number of seconds in ``JOIN_BOUNDS_S``, else one line."""
    import math

    if value is None:
        env = os.environ.get(ENV_JOIN, "").strip()
        if not env:
            return JOIN_DEFAULT_S
        value, what = env, ENV_JOIN
    lo, hi = JOIN_BOUNDS_S
    try:
        v = float(str(value)[:32])
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ExecutorError(f"{what}={str(value)[:32]!r}: the join deadline must be a number of seconds "
                            f"between {lo:g} and {hi:g} (default {JOIN_DEFAULT_S:g})")
    return v


def join_error(coordinator: str, deadline_s: float, process: int | None = None,
               processes: int | None = None) -> str:
    """The one line of a member that did not see the whole run join in time."""
    who = f"process {process} of {processes}" if process is not None else "this process"
    return (f"{who} could not join the run at coordinator {coordinator} within {deadline_s:g} s "
            "(another process of the run never reached it, or the coordinator is not up); "
            f"check that every process started, or on a slow host raise the deadline with "
            f"--join-timeout S or {ENV_JOIN}=S (at most {JOIN_BOUNDS_S[1]:g})")


class _JoinWatchdog:
    """Ends the process with one error line (exit status 2) if the join has not returned
    within ``deadline_s``: JAX's own timeout aborts the process with a native stack trace,
    and its wait releases the GIL, so a daemon thread can speak first.

    Example: process 0 of 2 alone, deadline 2 s -> at 2 s ``error: process 0 of 2 could
    not join the run at coordinator 127.0.0.1:23456 within 2 s (...)`` and exit 2."""

    def __init__(self, message: str, deadline_s: float):
        import threading

        self.message, self.done = message, threading.Event()
        self.thread = threading.Thread(target=self._watch, args=(deadline_s,), name="join-deadline", daemon=True)

    def _watch(self, deadline_s: float):
        if self.done.wait(deadline_s):
            return
        try:
            from synth.cliutil import report_error

            report_error(ExecutorError(self.message), sys.argv[1:])
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(2)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        return False


def initialize(cluster: bool = False, join_s: float | None = None) -> dict:
    """Join the run (see the module doc) and start JAX's backend. Returns
    ``{"process": i, "processes": N, "local_devices": d, "devices": D}``.

    ``join_s`` is the join deadline (default :func:`join_timeout_s`: 10 s, or
    ``REDIST_JOIN_TIMEOUT_S``): a process of the run that never comes up makes every other
    one end within it, with one line naming the coordinator, the deadline and the fix."""
    global _INITIALIZED
    import jax

    if not _INITIALIZED:
        deadline = join_timeout_s(join_s)
        jax_timeout = int(deadline) + _JAX_GRACE_S
        if is_member():
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            coord, num, pid, local = member_layout()
            jax.config.update("jax_num_cpu_devices", local)
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
            with _JoinWatchdog(join_error(coord, deadline, pid, num), deadline):
                jax.distributed.initialize(coord, num_processes=num, process_id=pid,
                                           initialization_timeout=jax_timeout, heartbeat_timeout_seconds=30)
        elif cluster:
            plats = os.environ.get("JAX_PLATFORMS", "")
            if plats in ("", "cpu"):
                try:  # CPU collectives across hosts need gloo; GPU/TPU ignore this
                    jax.config.update("jax_cpu_collectives_implementation", "gloo")
                except Exception:  # noqa: BLE001
                    pass
            try:
                with _JoinWatchdog(join_error("(found by the cluster launcher)", deadline), deadline):
                    jax.distributed.initialize(initialization_timeout=jax_timeout)
            except Exception as e:  # noqa: BLE001 - JAX's message names what it could not find
                raise ExecutorError(f"--cluster: jax.distributed.initialize() found no cluster "
                                    f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                                    "run under srun/mpirun/a TPU pod, or use --processes N on one host") from None
        _INITIALIZED = True
    devs = jax.devices()  # starts the backend with the count set above
    return {"process": jax.process_index(), "processes": jax.process_count(),
            "local_devices": len(jax.local_devices()), "devices": len(devs)}


def quiet_native_stdout() -> None:
    """Send what native code writes to file descriptor 1 (gloo logs every connection
    there) to stderr, and keep Python's ``sys.stdout`` on the real stdout, so that a
    member's stdout carries only the command's output (one JSON document with --json)."""
    if getattr(sys.stdout, "_redist_quiet", False):
        return
    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no real file descriptors (embedded): leave them alone
        return
    sys.stdout = os.fdopen(real, "w", buffering=1)
    sys.stdout._redist_quiet = True  # type: ignore[attr-defined]


def process_index() -> int:
    import jax

    return jax.process_index()


def gather_flags(flags: list[bool]) -> list[list[bool]]:
    """Every process's ``flags``, in process order (all processes must call this)."""
    import jax
    import numpy as np

    if jax.process_count() == 1:
        return [list(flags)]
    from jax.experimental import multihost_utils

    got = multihost_utils.process_allgather(np.asarray(flags, dtype=np.int32))
    return [[bool(v) for v in row] for row in np.asarray(got).reshape(jax.process_count(), -1)]


def shutdown() -> None:
    """Leave the run (all processes must call it); JAX becomes unusable afterwards."""
    global _INITIALIZED
    import jax

    if _INITIALIZED and jax.process_count() > 1:
        jax.distributed.shutdown()
    _INITIALIZED = False


# -- launcher --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port(port: int) -> int:
    if not 0 < port < 65536:
        raise ExecutorError(f"--port {port}: use a TCP port between 1 and 65535")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise ExecutorError(f"--port {port} is in use on 127.0.0.1; pick another or omit --port "
                                "to use a free one") from None
    return port


def _die_with_parent():  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the launcher still kills members on failure
        pass


def _error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("[Gloo]")]
    for ln in reversed(lines):
        if ln.startswith("error: "):
            return ln[len("error: "):]
    for ln in reversed(lines):  # an uncaught exception's last line
        if ":" in ln and not ln.startswith(("File ", "Traceback", "^")):
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


class _Relay:
    """Copies what process 0 writes to stderr (progress bars) to ours, without gloo's logs."""

    def __init__(self, path: Path):
        self.path, self.pos, self.buf = path, 0, ""

    def pump(self):
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except OSError:
            return
        self.buf += data
        import re

        parts = re.split(r"([\r\n])", self.buf)
        self.buf = parts.pop() if parts and parts[-1] not in ("\r", "\n") else ""
        out = []
        for text, sep in zip(parts[::2], parts[1::2]):
            if "[Gloo]" not in text:
                out.append(text + sep)
        if out:
            sys.stderr.write("".join(out))
            sys.stderr.flush()


class _Terminated(BaseException):
    """SIGTERM arrived while the launcher waited on its members."""


def _raise_terminated(signum, frame):
    raise _Terminated()


def _on_sigterm():
    """Turn SIGTERM into :class:`_Terminated` (so the members are ended and the temp
    folder removed); returns the previous handler, or None off the main thread."""
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: members still die with us (PR_SET_PDEATHSIG)
        return None


def _restore_sigterm(old) -> None:
    if old is not None:
        try:
            signal.signal(signal.SIGTERM, old)
        except ValueError:  # pragma: no cover
            pass


def launch(argv: list[str], processes: int, devices: int, port: int | None = None,
           timeout_s: float | None = None, env: dict | None = None, join_s: float | None = None) -> str:
    """Run ``python -m executor <argv>`` as ``processes`` members on this host; return
    process 0's stdout. Any member failing stops all of them and raises one
    :class:`ExecutorError` naming the process and its error; a member that never reaches
    the coordinator makes the others fail within the join deadline (``join_s``, passed to
    the members as ``REDIST_JOIN_TIMEOUT_S``); SIGTERM ends every member and is one line."""
    local = check_layout(processes, devices)
    port = check_port(port) if port is not None else free_port()
    base = dict(os.environ if env is None else env)
    base.pop("XLA_FLAGS", None)  # each member sets its own device count
    base.update({ENV_COORD: f"127.0.0.1:{port}", ENV_NUM: str(processes), ENV_LOCAL: str(local),
                 "JAX_PLATFORMS": "cpu"})
    if join_s is not None:
        base[ENV_JOIN] = repr(float(join_timeout_s(join_s)))
    tmp = Path(tempfile.mkdtemp(prefix="redist-procs-"))
    procs, outs, errs = [], [], []
    old_term = _on_sigterm()
    try:
        for i in range(processes):
            e = dict(base, **{ENV_ID: str(i)})
            out = open(tmp / f"p{i}.out", "w+")
            err = open(tmp / f"p{i}.err", "w+")
            outs.append(out)
            errs.append(err)
            procs.append(subprocess.Popen([sys.executable, "-m", "executor", *argv], env=e, stdout=out,
                                          stderr=err, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        relay = _Relay(tmp / "p0.err") if sys.stderr.isatty() else None  # process 0's progress bars
        while True:
            if relay is not None:
                relay.pump()
            codes = [p.poll() for p in procs]
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                i = bad[0]
                errs[i].flush()
                errs[i].seek(0)
                text = errs[i].read()
                code = codes[i]
                why = f"exit status {code}" if code > 0 else f"killed by signal {-code}"
                if "DEADLINE_EXCEEDED" in text and "RegisterTask" in text:  # JAX's own join timeout fired
                    raise ExecutorError(join_error(base[ENV_COORD], join_timeout_s(join_s), i, processes))
                line = _error_line(text)
                if code == 2 and line.startswith(f"process {i} of {processes} could not join"):
                    raise ExecutorError(line)  # the member's own join line says it all
                raise ExecutorError(f"process {i} of {processes} failed ({why}): {line}")
            if all(c == 0 for c in codes):
                break
            if deadline is not None and time.monotonic() > deadline:
                raise ExecutorError(f"the {processes} processes did not finish within {timeout_s:g} s")
            time.sleep(0.1)
        outs[0].flush()
        outs[0].seek(0)
        return outs[0].read()
    except _Terminated:
        raise ExecutorError(f"stopped by SIGTERM: the {len(procs)} of {processes} processes started "
                            "were ended") from None
    finally:
        _restore_sigterm(old_term)
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        for f in outs + errs:
            f.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


def add_arguments(p) -> None:
    """``--processes``, ``--port`` and ``--cluster`` for a command that can span processes."""
    from synth.limits import float_arg, int_arg

    p.add_argument("--processes", type=int_arg(1, "cpu_devices"), default=1,
                   help="local processes (jax.distributed, gloo over loopback), each owning "
                        "devices/processes CPU devices (default: %(default)s)")
    p.add_argument("--port", type=int_arg(1, maximum=65535), default=None,
                   help="coordinator port on 127.0.0.1 for --processes (default: a free one)")
    p.add_argument("--join-timeout", type=float_arg(*JOIN_BOUNDS_S), default=None, metavar="S",
                   help=f"seconds every process waits for the whole run to reach the coordinator "
                        f"(jax.distributed) before it fails in one line (default: {ENV_JOIN}, else "
                        f"{JOIN_DEFAULT_S:g}; {JOIN_BOUNDS_S[0]:g} to {JOIN_BOUNDS_S[1]:g})")
    p.add_argument("--cluster", action="store_true",
                   help="this process is one of many started by a cluster launcher (srun, mpirun, a TPU "
                        "pod): call jax.distributed.initialize() and let it find the coordinator")


def dispatch(args, argv, run_command):
    """What ``python -m executor`` does for a command that may span processes:
    launch members (``--processes N`` > 1), join as a member, or run alone."""
    n = getattr(args, "processes", 1) or 1
    if n > 1 and not is_member():
        if getattr(args, "cluster", False):
            raise ExecutorError("--processes and --cluster do not mix: --cluster processes are started "
                                "by the cluster's launcher")
        check_layout(n, args.devices)
        check_processes_memory(n, args.devices, f"--processes {n} --devices {args.devices}")
        join_timeout_s(getattr(args, "join_timeout", None))  # a bad REDIST_JOIN_TIMEOUT_S: one line now
        text = launch(list(argv), n, args.devices, port=getattr(args, "port", None))
        sys.stdout.write(text)
        return None
    if n == 1 and getattr(args, "port", None) is not None and not is_member():
        raise ExecutorError("--port is for --processes N > 1")
    if is_member() or getattr(args, "cluster", False):
        join_timeout_s(getattr(args, "join_timeout", None))  # a bad value: one line before JAX starts
    if is_member():
        member_layout()  # a partial set of the variables: one line, before JAX starts
    elif getattr(args, "devices", None):
        check_processes_memory(1, args.devices, f"--devices {args.devices}")
    if is_member() or getattr(args, "cluster", False):
        quiet_native_stdout()
        initialize(cluster=getattr(args, "cluster", False), join_s=getattr(args, "join_timeout", None))
        out = run_command(args)
        if process_index() != 0:
            return None
        if isinstance(out, dict):
            import jax

            out = {**out, "processes": jax.process_count()}
        return out
    return run_command(args)


def processes_note() -> str:
    """``" in N processes (bit-exact checked on every process)"`` when N > 1, else ``""``."""
    import jax

    n = jax.process_count()
    return f" in {n} processes, each checked" if n > 1 else ""
