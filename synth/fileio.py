"""Safe file input and output for every command-line tool and the app.

Invariants, stated once:

* **reading**: every input file goes through :func:`read_bytes` (and the layers on
  it: :func:`read_text`, :func:`read_json`, :func:`read_yaml`, :func:`read_validated`,
  :func:`iter_lines`). The file is opened with ``O_NONBLOCK`` (a FIFO or device never
  blocks the open), the *open descriptor* is ``fstat``-ed and anything but a regular
  file is refused, and the size cap (``file_bytes``, ``yaml_bytes``, ``rows_bytes`` of
  :mod:`synth.limits`) is checked before a byte is read. :func:`read_validated` is the
  one reader of a document: then a pydantic schema.
* **writing**: nothing the tools write follows a link out of its folder.
  :func:`check_output_file` refuses a link, folder, FIFO or device before long work;
  :func:`atomic_writer` writes a unique temporary file in the same folder and
  ``os.replace``-s it onto the target (a link planted later is replaced, never written
  through); the files written in place -- ``rows.jsonl`` and ``.lock`` of a run folder
  (:func:`open_for_append`, :func:`open_for_update`, :func:`open_lock_file`) -- are
  opened with ``O_NOFOLLOW`` and ``fstat``-ed.
* **showing** (the app's results root): :func:`check_inside` refuses a path outside
  the root or with a link anywhere below it.

Every failure raises :class:`FileError` (a ``RedistributionError``) whose message is
one line naming the file, what went wrong and what to do, e.g.
``results file OUT/rows.jsonl is a pipe (FIFO), not a regular file; give a file``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile

from synth.errors import RedistributionError

#: Largest file the tools read whole by default (the ``file_bytes`` limit's default;
#: see synth.limits for the caps table).
MAX_READ_BYTES = 32 << 20


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
    if os.path.islink(p):
        raise FileError(f"{what} {p}: is a symbolic link; the tool does not write through links "
                        "(remove it or give another path)")
    if os.path.isdir(p):
        raise FileError(f"{what} {p}: is a folder; give a file path inside it")
    if os.path.lexists(p):
        try:
            st = os.stat(p)
        except OSError as e:
            raise FileError(f"{what} {p}: cannot be used ({_reason(e)})") from None
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{what} {p}: is {_kind(st.st_mode)}, not a regular file; give a file path")
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


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def check_inside(path, root, what: str = "file") -> str:
    """``path`` (absolute), refused unless it lies inside the folder ``root`` and no part
    of it below ``root`` is a symbolic link: a link inside the results root must not show
    a file from outside it. Example: root ``results/``, path ``results/a/rows.jsonl``
    where ``a`` links to ``/etc``: refused at ``results/a``."""
    root_abs = os.path.abspath(os.fspath(root))
    p = os.path.abspath(os.fspath(path))
    if os.path.commonpath([p, root_abs]) != root_abs:
        raise FileError(f"{what} {os.fspath(path)} is outside {root_abs}; only files under it are used")
    cur = root_abs
    for part in os.path.relpath(p, root_abs).split(os.sep):
        if part in ("", "."):
            continue
        cur = os.path.join(cur, part)
        try:
            mode = os.lstat(cur).st_mode
        except FileNotFoundError:
            break
        except OSError as e:
            raise FileError(f"{what} {os.fspath(path)}: cannot be used ({_reason(e)})") from None
        if stat.S_ISLNK(mode):
            raise FileError(f"{what} {os.fspath(path)}: {cur} is a symbolic link; links inside {root_abs} "
                            "are not followed (replace it with the file or folder itself)")
    return p


def _open_regular(p: str, what: str, flags: int, follow_links: bool, verb: str, mode: int = 0o666) -> int:
    """Open ``p`` without blocking on a FIFO or a device and without following a final
    symbolic link (unless ``follow_links``); refuse anything but a regular file (fstat on
    the open descriptor, so the check and the use see the same file)."""
    flags |= getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(p, flags, mode)
    except FileNotFoundError:
        raise FileError(f"{what} {p} does not exist") from None
    except IsADirectoryError:
        raise FileError(f"{what} {p} is a folder; give a file") from None
    except OSError as e:
        if e.errno == errno.ELOOP or (not follow_links and os.path.islink(p)):
            raise FileError(f"{what} {p} is a symbolic link; the tool does not {verb} through links "
                            "(remove it or give the file itself)") from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise FileError(f"{what} {p} is a pipe (FIFO), not a regular file; give a file path") from None
        raise FileError(f"{what} {p}: cannot be {'read' if verb == 'read' else 'written'} ({_reason(e)})") from None
    try:
        st = os.fstat(fd)
    except OSError as e:  # pragma: no cover - fstat on an open descriptor
        os.close(fd)
        raise FileError(f"{what} {p}: cannot be used ({_reason(e)})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileError(f"{what} {p} is {_kind(st.st_mode)}, not a regular file; give a file")
    # back to blocking reads/writes on the regular file
    if getattr(os, "O_NONBLOCK", 0):
        try:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        except (ImportError, OSError):  # pragma: no cover - non-POSIX
            pass
    return fd


def read_bytes(path, what: str = "file", max_bytes: int | None = None, *, follow_links: bool = True,
               inside=None, limit_name: str = "file_bytes") -> bytes:
    """The bytes of a regular file, at most ``max_bytes`` (default: the ``file_bytes``
    limit). A folder, FIFO, device or socket is refused before reading, a file over the
    cap before it is read. With ``inside`` the file must lie under that folder and no
    link below it is followed."""
    from synth.limits import limit

    if path is None or str(path).strip() == "":
        raise FileError(f"{what}: empty path; give a file name")
    p = os.fspath(path)
    if "\x00" in p:
        raise FileError(f"{what}: the path contains a NUL character")
    cap = limit(limit_name) if max_bytes is None else max_bytes
    how = f" (set REDIST_LIMIT_{limit_name.upper()} to change it)" if max_bytes is None else ""
    if inside is not None:
        check_inside(p, inside, what)
        follow_links = False
    fd = _open_regular(p, what, os.O_RDONLY, follow_links, "read")
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise FileError(f"{what} {p} is {size:,} bytes; the limit is {cap:,}{how}")
        try:
            data = f.read(cap + 1)
        except OSError as e:
            raise FileError(f"{what} {p}: cannot be read ({_reason(e)})") from None
    if len(data) > cap:  # grew while we read it (or a /proc-like file that reports size 0)
        raise FileError(f"{what} {p} is over {cap:,} bytes, the limit{how}")
    return data


def iter_lines(path, what: str = "file", *, inside=None, max_line_bytes: int = 1 << 20):
    """Yield ``(line number, text)`` of a UTF-8 line file (``rows.jsonl``), refusing what
    :func:`read_bytes` refuses and a link in its place; a line over ``max_line_bytes`` or the whole file over the
    ``rows_bytes`` limit raise :class:`FileError`. Reads line by line (constant memory)."""
    from synth.limits import limit

    p = os.fspath(path)
    if inside is not None:
        check_inside(p, inside, what)
    fd = _open_regular(p, what, os.O_RDONLY, False, "read")  # a file the tool writes: never a link
    cap = limit("rows_bytes")
    with os.fdopen(fd, "rb") as f:
        total = 0
        for i, raw in enumerate(iter(lambda: f.readline(max_line_bytes + 1), b""), 1):
            total += len(raw)
            if len(raw) > max_line_bytes:
                raise FileError(f"{what} {p}: line {i} is over {max_line_bytes:,} bytes; a row is far smaller "
                                "(the file is damaged)")
            if total > cap:
                raise FileError(f"{what} {p} is over {cap:,} bytes (set REDIST_LIMIT_ROWS_BYTES to change it)")
            try:
                yield i, raw.decode("utf-8-sig" if i == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise FileError(f"{what} {p}: line {i} is not UTF-8 text (byte {e.start}); "
                                "the file is damaged") from None


def open_for_append(path, what: str = "file"):
    """A text file object appending to ``path`` (created if missing), opened without
    following a link and refused unless it is a regular file: a link, FIFO or folder in
    its place ends in one line and the file a link points at is left unchanged."""
    p = os.fspath(path)
    fd = _open_regular(p, what, os.O_WRONLY | os.O_APPEND | os.O_CREAT, False, "write")
    return os.fdopen(fd, "a", encoding="utf-8")


def open_for_update(path, what: str = "file"):
    """A binary ``r+`` file object on an existing regular file (no link followed)."""
    p = os.fspath(path)
    fd = _open_regular(p, what, os.O_RDWR, False, "write")
    return os.fdopen(fd, "r+b")


def open_lock_file(path, what: str = "lock file"):
    """The lock file ``path`` opened read-write (created if missing), never through a
    link, never a FIFO or folder."""
    p = os.fspath(path)
    fd = _open_regular(p, what, os.O_RDWR | os.O_CREAT, False, "write")
    return os.fdopen(fd, "a+")


def read_text(path, what: str = "file", max_bytes: int | None = None, **kw) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark is dropped)."""
    data = read_bytes(path, what, max_bytes, **kw)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} {os.fspath(path)} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                        f"{e.start}); save it as UTF-8") from None


def read_json(path, what: str = "file", max_bytes: int | None = None, *, finite: bool = False, **kw):
    """A JSON document; with ``finite`` the non-standard ``NaN``/``Infinity`` are refused."""
    text = read_text(path, what, max_bytes, **kw)
    try:
        return json.loads(text, parse_constant=_no_constant) if finite else json.loads(text)
    except json.JSONDecodeError as e:
        raise FileError(f"{what} {os.fspath(path)} is not valid JSON: {e.msg} at line {e.lineno} "
                        f"column {e.colno}") from None
    except _NonFinite as e:
        raise FileError(f"{what} {os.fspath(path)}: {e.args[0]} is not a finite number; JSON has no "
                        "NaN or Infinity") from None
    except RecursionError:
        raise FileError(f"{what} {os.fspath(path)} is nested too deeply to read") from None


class _NonFinite(ValueError):
    pass


def _no_constant(name):
    raise _NonFinite(name)


def read_yaml(path, what: str = "file", max_bytes: int | None = None, **kw):
    """A YAML (or JSON) document: safe loader only (no Python tags), size-capped by
    ``yaml_bytes`` (PyYAML parses about a MB a second), nesting capped."""
    import yaml

    kw.setdefault("limit_name", "yaml_bytes")
    text = read_text(path, what, max_bytes, **kw)
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FileError(f"{what} {os.fspath(path)} is not valid YAML ({msg})") from None
    except RecursionError:
        raise FileError(f"{what} {os.fspath(path)} is nested too deeply to read") from None


def read_validated(path, model, what: str = "file", *, fmt: str = "auto", max_bytes: int | None = None, **kw):
    """**The one reader** for an input file: a regular file only (no FIFO, device or
    folder), size-capped before reading, UTF-8, parsed (``fmt`` ``json``, ``yaml`` or
    ``auto`` from the suffix), then checked against the pydantic ``model`` (finite,
    positive, bounded numbers are the model's job). Returns ``(data, validated)``; every
    failure is one :class:`FileError` / ``RedistributionError`` line naming the file, the
    field and the rule."""
    from synth.schema import validate

    p = os.fspath(path) if path is not None else ""
    if fmt == "auto":
        fmt = "json" if str(p).endswith(".json") or str(p).endswith(".jsonl") else "yaml"
    data = read_json(p, what, max_bytes, finite=True, **kw) if fmt == "json" else read_yaml(p, what, max_bytes, **kw)
    return data, validate(model, data, f"{what} {p}")
