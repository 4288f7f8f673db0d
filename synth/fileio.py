"""Safe file input and output for every command-line tool.

* :func:`check_output_file` / :func:`check_output_dir` run *before* long work starts,
  so a bad ``--out`` (a directory, a missing parent folder, a read-only filesystem,
  a device such as ``/dev/full``) fails in a second, not after the work is done.
* :func:`atomic_write_text` / :func:`atomic_write_bytes` / :func:`atomic_writer`
  write through a temporary file with a unique name in the same folder and then
  ``os.replace`` it onto the target: readers see the old file or the new one, never a
  half-written one, and two writers never share a temporary name.
* :func:`read_text` / :func:`read_json` read UTF-8 text, refusing a missing file, a
  folder, a device, a file over :data:`MAX_READ_BYTES` or bytes that are not UTF-8.

Every failure raises :class:`FileError` (a ``RedistributionError``) whose message is
one line naming the file, what went wrong and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile

from synth.errors import RedistributionError

#: Largest file the tools read (configs, profiles, schedules, calibration reports).
MAX_READ_BYTES = 256 << 20


class FileError(RedistributionError):
    """A file that cannot be read or written as asked."""


def _reason(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return "the filesystem is read-only"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return (e.strerror or type(e).__name__).splitlines()[0] if e.strerror else type(e).__name__


def check_output_file(path, what: str = "--out", make_parents: bool = False) -> str:
    """Check that a file can be written at ``path`` (without writing it). Returns the
    path as a string. With ``make_parents`` a missing parent folder is fine when it can
    be created."""
    if path is None or str(path).strip() == "":
        raise FileError(f"{what}: empty path; give a file name")
    p = os.fspath(path)
    if "\x00" in p:
        raise FileError(f"{what}: the path contains a NUL character")
    if os.path.isdir(p):
        raise FileError(f"{what} {p}: is a folder; give a file path inside it")
    if os.path.lexists(p):
        try:
            st = os.stat(p)
        except OSError as e:
            raise FileError(f"{what} {p}: cannot be used ({_reason(e)})") from None
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{what} {p}: is not a regular file (a device, pipe or socket); give a file path")
    parent = os.path.dirname(os.path.abspath(p))
    if make_parents and not os.path.exists(parent):
        check_output_dir(parent, what)
        return p
    if not os.path.exists(parent):
        raise FileError(f"{what} {p}: the folder {parent} does not exist; create it first")
    if not os.path.isdir(parent):
        raise FileError(f"{what} {p}: {parent} is not a folder")
    _probe_dir(parent, what, p)
    return p


def check_output_dir(path, what: str = "--out") -> str:
    """Check that ``path`` is, or can be created as, a writable folder."""
    if path is None or str(path).strip() == "":
        raise FileError(f"{what}: empty path; give a folder name")
    p = os.fspath(path)
    if "\x00" in p:
        raise FileError(f"{what}: the path contains a NUL character")
    if os.path.exists(p):
        if not os.path.isdir(p):
            raise FileError(f"{what} {p}: exists and is not a folder; give a folder path")
        _probe_dir(os.path.abspath(p), what, p)
        return p
    anc = os.path.dirname(os.path.abspath(p))
    while anc and not os.path.exists(anc):
        anc = os.path.dirname(anc)
    if not os.path.isdir(anc):
        raise FileError(f"{what} {p}: {anc} is not a folder")
    _probe_dir(anc, what, p)
    return p


def _probe_dir(folder: str, what: str, p: str) -> None:
    """Create and remove a unique file in ``folder``: catches read-only filesystems
    and missing permissions that ``os.access`` can miss (e.g. for root)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
    except OSError as e:
        raise FileError(f"{what} {p}: cannot write in {folder} ({_reason(e)})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_writer(path, what: str = "--out", mode: str = "w", encoding: str | None = "utf-8"):
    """Context manager yielding a file object; on success the file replaces ``path``.
    On any error the temporary file is removed and ``path`` is left untouched."""
    p = check_output_file(path, what)
    folder = os.path.dirname(os.path.abspath(p))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(p)}.", suffix=".tmp")
    except OSError as e:
        raise FileError(f"{what} {p}: cannot write in {folder} ({_reason(e)})") from None
    ok = False
    try:
        kw = {"encoding": encoding} if "b" not in mode else {}
        try:
            with os.fdopen(fd, mode, **kw) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, p)
        except OSError as e:
            raise FileError(f"{what} {p}: writing failed ({_reason(e)})") from None
        ok = True
    finally:
        if not ok:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_write_text(path, text: str, what: str = "--out") -> str:
    with atomic_writer(path, what) as f:
        f.write(text)
    return os.fspath(path)


def atomic_write_bytes(path, data: bytes, what: str = "--out") -> str:
    with atomic_writer(path, what, mode="wb") as f:
        f.write(data)
    return os.fspath(path)


def atomic_write_json(path, obj, what: str = "--out", **kw) -> str:
    return atomic_write_text(path, json.dumps(obj, **kw) + "\n", what)


def read_bytes(path, what: str = "file") -> bytes:
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileError(f"{what} {p} does not exist") from None
    except OSError as e:
        raise FileError(f"{what} {p}: cannot be read ({_reason(e)})") from None
    if stat.S_ISDIR(st.st_mode):
        raise FileError(f"{what} {p} is a folder; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise FileError(f"{what} {p} is not a regular file (a device, pipe or socket); give a file")
    if st.st_size > MAX_READ_BYTES:
        raise FileError(f"{what} {p} is {st.st_size:,} bytes; the limit is {MAX_READ_BYTES:,}")
    try:
        with open(p, "rb") as f:
            return f.read(MAX_READ_BYTES + 1)
    except OSError as e:
        raise FileError(f"{what} {p}: cannot be read ({_reason(e)})") from None


def read_text(path, what: str = "file") -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark is dropped)."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} {os.fspath(path)} is not UTF-8 text (byte {e.start}: "
                        f"{data[e.start:e.start + 1]!r}); save it as UTF-8") from None


def read_json(path, what: str = "file"):
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FileError(f"{what} {os.fspath(path)} is not valid JSON: {e.msg} at line {e.lineno} "
                        f"column {e.colno}") from None
    except RecursionError:
        raise FileError(f"{what} {os.fspath(path)} is nested too deeply to read") from None
