"""Shareable links: every scenario field, and each page's own inputs, live in the URL
(``st.query_params``). Opening a link restores them once per session; after that the
URL follows the inputs on every run, so copying the address bar shares the page.

Fields: the scenario (``machine_profile``, ``machine_size``, ``mesh``, ``shape``,
``dtype``, ``src``, ``dst``, ``planner``) and :data:`PAGE_FIELDS`.
"""

from __future__ import annotations

import streamlit as st

from ui import scenario

#: Page inputs kept in the URL: key -> (type, default).
PAGE_FIELDS = {
    "sim_placement": (str, ""),
    "cmp_bw_scale": (float, 1.0),
    "cmp_lat_scale": (float, 1.0),
    "cmp_mesh": (str, ""),
    "cmp_placement": (str, ""),
    "cmp_xla": (str, ""),        # "1": the Compare page shows XLA's compiled rows
    "layout_step": (str, ""),
    "plan_view": (str, "Memory per step"),  # the Plan page's open picture tab
    "sim_view": (str, "Timeline"),          # the Simulate page's
}
#: Every field a link carries.
FIELDS = tuple(scenario.KEYS) + tuple(PAGE_FIELDS)

_LOADED = "_url_loaded"
_WARN = "_url_warnings"


def load_from_url() -> None:
    """Once per session: copy the URL's fields into the session (scenario and page
    inputs). Unknown fields are ignored; fields of the wrong type are reported."""
    if st.session_state.get(_LOADED):
        return
    st.session_state[_LOADED] = True
    warnings = []
    qp = st.query_params
    for k in qp:
        v = qp.get(k)
        if k in scenario.KEYS:
            st.session_state[k] = v
            st.session_state["_keep_" + k] = v
        elif k in PAGE_FIELDS:
            typ, _default = PAGE_FIELDS[k]
            try:
                val = typ(v)
            except (TypeError, ValueError):
                warnings.append(f"link field {k}={v!r} is not a {typ.__name__}; ignored")
                continue
            st.session_state["_keep_" + k] = val
    st.session_state[_WARN] = warnings


def url_warnings() -> list[str]:
    return list(st.session_state.get(_WARN, []))


def restore(key: str) -> None:
    """Before a page input is drawn: give it its kept value (from the link or an
    earlier visit)."""
    if key not in st.session_state and "_keep_" + key in st.session_state:
        st.session_state[key] = st.session_state["_keep_" + key]


def save_page_fields() -> None:
    """After the page inputs are drawn (or in their ``on_change``): keep their values."""
    for k in PAGE_FIELDS:
        if k in st.session_state:
            st.session_state["_keep_" + k] = st.session_state[k]


def current_fields() -> dict:
    """Every field's current value as text (the scenario as kept, page inputs as kept)."""
    out = {}
    for k in scenario.KEYS:
        out[k] = str(st.session_state.get("_keep_" + k, scenario.DEFAULTS[k]))
    for k, (_typ, default) in PAGE_FIELDS.items():
        v = st.session_state.get(k, st.session_state.get("_keep_" + k, default))
        if v is None or v == "" or v == default:
            continue
        out[k] = f"{v:g}" if isinstance(v, float) else str(v)
    return out


def sync_url() -> None:
    """Write every field into the URL (only when something changed)."""
    want = current_fields()
    have = {k: st.query_params.get(k) for k in st.query_params}
    if have != want:
        st.query_params.from_dict(want)


def share_link_text(base: str = "") -> str:
    from urllib.parse import urlencode

    return base + "?" + urlencode(current_fields())
