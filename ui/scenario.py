"""The scenario every analysis page shares: machine, mesh, array, shardings, planner.

The widgets live in the sidebar and are rendered by ``app.py`` for the pages that
need a scenario. Widget keys are stable (tests select by key):

``machine_profile``, ``machine_size``, ``mesh``, ``shape``, ``dtype``, ``src``,
``dst``, ``planner``.

Streamlit forgets a widget's value when a run does not render it (e.g. while the
user is on the Calibration page), so each value is also kept under a shadow key
``_keep_<key>`` and restored when the widget comes back.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ui.errors import InputError

#: Element sizes in bytes for the dtypes a user can pick.
DTYPES = {
    "bfloat16": 2,
    "float32": 4,
    "float16": 2,
    "int8": 1,
    "int32": 4,
    "float64": 8,
}

#: The built-in first screen: an MLP up-projection weight of a transformer
#: (d_model=8192, d_ff=32768, bf16) on a 64-chip TPU v4 slice. In training it is
#: stored FSDP-style (d_model split over `data`) and tensor-parallel (d_ff split over
#: `model`); a second job (e.g. the rollout/inference side of RL fine-tuning) reads it
#: with the roles of the two mesh axes swapped. The `normal` plan does it in three
#: collectives and never holds more than one 8 MiB shard, where gathering first would
#: need the whole 512 MiB weight on every chip.
DEFAULTS = {
    "machine_profile": "tpu-v4",
    "machine_size": "4x4x4",
    "mesh": "data=16,model=4",
    "shape": "8192, 32768",
    "dtype": "bfloat16",
    "src": "[8192{data}, 32768{model}]",
    "dst": "P('model', 'data')",
    "planner": None,  # synth's default planner (filled in below)
}


def default_planner() -> str:
    """The planner ``synth.synthesize`` uses when none is given."""
    import inspect

    import synth

    try:
        return str(inspect.signature(synth.synthesize).parameters["planner"].default)
    except (KeyError, TypeError, ValueError):
        return "normal"


DEFAULTS["planner"] = default_planner()

KEYS = tuple(DEFAULTS)


@dataclass(frozen=True)
class Scenario:
    """Raw scenario text as typed by the user; parsed by :mod:`ui.compute`."""

    machine_profile: str
    machine_size: str
    mesh: str
    shape: str
    dtype: str
    src: str
    dst: str
    planner: str

    @property
    def machine(self) -> str:
        return f"{self.machine_profile}:{self.machine_size}"

    @property
    def itemsize(self) -> int:
        try:
            return DTYPES[self.dtype]
        except KeyError:
            raise InputError(
                f"dtype {self.dtype!r} is not known; choose one of {sorted(DTYPES)}"
            ) from None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in KEYS}


DEFAULT_SCENARIO = Scenario(**DEFAULTS)

_SHAPE_SPLIT = re.compile(r"[,x\s]+")


def parse_shape(text: str) -> tuple[int, ...]:
    """``'8192, 32768'``, ``'(8192, 32768)'`` or ``'8192x32768'`` -> ``(8192, 32768)``."""
    body = str(text).strip().strip("()[]").strip()
    if not body:
        raise InputError("array shape is empty; write the global shape like '8192, 32768'")
    parts = [p for p in _SHAPE_SPLIT.split(body) if p]
    out = []
    for i, p in enumerate(parts):
        try:
            v = int(p)
        except ValueError:
            raise InputError(
                f"array shape {text!r}: dim {i} is {p!r}, not an integer; write the global "
                "shape like '8192, 32768'"
            ) from None
        if v < 1:
            raise InputError(f"array shape {text!r}: dim {i} is {v}; sizes must be >= 1")
        out.append(v)
    return tuple(out)


def parse_machine_size(text: str) -> tuple[int, ...]:
    """``'4x4x4'`` -> ``(4, 4, 4)``; ``'8'`` -> ``(8,)``."""
    body = str(text).strip().lower()
    parts = [p.strip() for p in body.split("x")] if body else []
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise InputError(
            f"machine size {text!r} is not a slice shape; write it like '4x4x4' (TPU torus) "
            "or '8' (devices)"
        )
    return dims


def machine_devices(size_text: str) -> int:
    return math.prod(parse_machine_size(size_text))


def suggest_meshes(num_devices: int, names=("data", "model")) -> list[str]:
    """A few two-axis meshes with exactly ``num_devices`` devices (for error messages)."""
    out = []
    for m in (1, 2, 4, 8, 16):
        if num_devices % m == 0 and num_devices // m >= 1:
            out.append(f"{names[0]}={num_devices // m},{names[1]}={m}")
    return out[:4]


# -- Streamlit widgets ------------------------------------------------------------
def _keep(st, key: str):
    """Restore a widget's value from its shadow key before the widget is created."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get("_keep_" + key, DEFAULTS[key])


def _save(st, key: str):
    st.session_state["_keep_" + key] = st.session_state[key]


def render_sidebar(profiles: list[str], planners: list[str], default_size=None) -> Scenario:
    """Draw the scenario inputs in the sidebar and return what they hold.

    ``default_size(profile) -> str | None`` gives the slice size to switch to when the
    user picks another profile (the mesh is then resized to match, if it can be)."""
    import streamlit as st

    for k in KEYS:
        _keep(st, k)
    # a value from a shared link that is not among the choices is replaced, and said so
    for key, choices in (("machine_profile", profiles), ("planner", planners), ("dtype", list(DTYPES))):
        v = st.session_state[key]
        if v not in choices:
            use = DEFAULTS[key] if DEFAULTS[key] in choices else choices[0]
            st.session_state[key] = use
            st.session_state.setdefault("_url_warnings", []).append(
                f"link field {key}={str(v)[:60]!r} is not one of the choices; using {use!r}")
    sb = st.sidebar
    sb.subheader("Scenario")
    sb.selectbox("Machine profile", profiles, key="machine_profile",
                 help="Hardware profile from models/profiles (bandwidths, latencies, topology).",
                 on_change=_profile_changed, args=(default_size,))
    sb.text_input("Machine size", key="machine_size",
                  help="Slice shape, e.g. 4x4x4 for a 64-chip TPU v4 torus, or 8 for 8 devices.")
    sb.text_input("Mesh axes", key="mesh",
                  help="Named axes with sizes, major first, e.g. data=16,model=4. "
                       "Their product must equal the machine's device count.")
    sb.text_input("Array shape", key="shape", help="Global shape, e.g. 8192, 32768. Canonical source "
                  "and target types follow it.", on_change=on_shape_change)
    sb.selectbox("dtype", list(DTYPES), key="dtype")
    sb.text_input("Source sharding", key="src",
                  help="Canonical [8192{data}, 32768{model}] or PartitionSpec P('data', 'model').")
    sb.text_input("Target sharding", key="dst",
                  help="Canonical [8192{model}, 32768{data}] or PartitionSpec P('model', 'data').")
    sb.selectbox("Planner", planners, key="planner",
                 help="auto: the cheapest plan on this machine within the memory bound. "
                      "normal: the memory-bounded plan (slices, all-to-alls, permutes, gathers). "
                      "easy: gather everything, then slice.")
    sb.button("Reset to the default scenario", key="reset_scenario", on_click=reset)
    for k in KEYS:
        _save(st, k)
    return Scenario(**{k: st.session_state[k] for k in KEYS})


def _profile_changed(default_size):
    """A new profile: take its default size and fit the mesh to its device count (and,
    where it can, to the array: each sharded dimension divisible by its axes)."""
    import streamlit as st

    if default_size is None:
        return
    size = default_size(st.session_state["machine_profile"])
    if not size:
        return
    st.session_state["machine_size"] = size
    try:
        n = machine_devices(size)
        from synth import Mesh

        mesh = Mesh.parse(st.session_state["mesh"])
    except Exception:  # noqa: BLE001 - a bad mesh stays as typed; the page says why
        return
    if mesh.size != n and len(mesh.names) >= 1:
        st.session_state["mesh"] = fit_mesh(mesh.names, mesh.sizes, n,
                                            fits=_fits_array(st.session_state.get("shape", ""),
                                                             st.session_state.get("src", ""),
                                                             st.session_state.get("dst", "")))


def _fits_array(shape_text: str, src_text: str, dst_text: str):
    """``padding(mesh_text) -> float``: the padding elements both shardings would hold
    on that mesh, over all devices (0 when they divide the array evenly; ``inf`` when
    they do not parse on it)."""
    def padding(mesh_text: str) -> float:
        try:
            import synth

            mesh = synth.Mesh.parse(mesh_text)
            shape = parse_shape(shape_text) if str(shape_text).strip() else None
            src = synth.parse_type(src_text, shape).check(mesh, "source")
            dst = synth.parse_type(dst_text, shape or src.shape).check(mesh, "target")
            return float(sum(t.shard_elems(mesh) * mesh.size - t.num_elems() for t in (src, dst)))
        except Exception:  # noqa: BLE001 - any failure means "does not fit"
            return float("inf")
    return padding


def _divisors(n: int) -> list[int]:
    small = [f for f in range(1, int(n ** 0.5) + 1) if n % f == 0]
    return sorted(set(small + [n // f for f in small]))


def _factorizations(n: int, k: int):
    """Ordered ``k``-tuples with product ``n`` (lazily; over divisors only)."""
    if k == 1:
        yield (n,)
        return
    for f in _divisors(n):
        for rest in _factorizations(n // f, k - 1):
            yield (f,) + rest


def fit_mesh(names, sizes, n: int, fits=None) -> str:
    """Resize a mesh to ``n`` devices with the same axis names. Among the meshes with
    ``n`` devices, prefer the least ``fits(mesh_text)`` (the padding the shardings would
    need; 0 = even), then the one closest to the old sizes (log distance, minor axes
    weighted more)."""
    import math as _m

    names, sizes = tuple(names), tuple(sizes)

    def text(sz):
        return ",".join(f"{a}={s}" for a, s in zip(names, sz))

    def dist(sz):
        return sum((1 + i) * abs(_m.log(a) - _m.log(b)) for i, (a, b) in enumerate(zip(sz, sizes)))

    import itertools

    from synth.limits import limit

    # bounded: a 12-axis mesh on 4096 devices has over a million factorizations
    pool = list(itertools.islice(_factorizations(n, len(names)), 20 * limit("options")))
    if _m.prod(sizes) == n and all(isinstance(x, int) and x >= 1 for x in sizes):
        pool.append(sizes)  # the old sizes still fit: keep them among the candidates
    cands = sorted(pool, key=dist)[:200]
    if fits is not None:
        return text(min(cands, key=lambda sz: (fits(text(sz)), dist(sz))))
    return text(cands[0])


def on_shape_change():
    """The array shape changed: rewrite canonical source/target types (which spell the
    sizes) to the new shape, keeping their axes; PartitionSpecs need no change."""
    import streamlit as st

    try:
        shape = parse_shape(st.session_state["shape"])
    except InputError:
        return
    for k in ("src", "dst"):
        st.session_state[k] = reshape_type_text(st.session_state.get(k, ""), shape)


def reshape_type_text(text: str, shape) -> str:
    """``'[8192{data}, 32768{model}]'`` on shape ``(64, 128)`` -> ``'[64{data}, 128{model}]'``;
    a PartitionSpec or an unparsable text is returned unchanged. A rank change keeps the
    axes of the leading dims."""
    t = str(text).strip()
    if not t.startswith("["):
        return text
    try:
        import synth

        old = synth.ArrayType.parse(t)
    except Exception:  # noqa: BLE001 - the page reports the bad text
        return text
    dims = [synth.types.Dim(size, old.dims[i].axes if i < len(old.dims) else ())
            for i, size in enumerate(shape)]
    used = {a for d in dims for a in d.axes}
    lost = [a for d in old.dims[len(shape):] for a in d.axes if a not in used]
    try:
        return str(synth.ArrayType(tuple(dims), tuple(old.unreduced)))
    except Exception:  # noqa: BLE001
        return text if not lost else text


def reset():
    import streamlit as st

    for k in KEYS:
        st.session_state[k] = DEFAULTS[k]
        st.session_state["_keep_" + k] = DEFAULTS[k]


def current() -> Scenario:
    """The scenario as last saved (for pages that do not draw the sidebar)."""
    import streamlit as st

    return Scenario(**{k: st.session_state.get("_keep_" + k, DEFAULTS[k]) for k in KEYS})


def mesh_shapes(names, n: int, keep: str | None = None) -> list[str]:
    """Meshes with these axis names (in order) and ``n`` devices, e.g. for the what-if
    mesh selector: ``data=64,model=1`` ... ``data=1,model=64``. At most the ``options``
    limit (1,000) entries -- a 12-axis mesh on 4,096 devices has 1.35 million -- with
    ``keep`` (the current mesh) always among them."""
    import itertools

    from synth.limits import limit

    names = tuple(names)
    cap = limit("options")

    def rec(k, left):
        if k == len(names) - 1:
            yield (left,)
            return
        for f in reversed(_divisors(left)):
            for rest in rec(k + 1, left // f):
                yield (f,) + rest

    out = [",".join(f"{a}={s}" for a, s in zip(names, sizes)) for sizes in itertools.islice(rec(0, n), cap)]
    if keep is not None and keep not in out:
        out = ([keep] + out)[:cap]
    return out
