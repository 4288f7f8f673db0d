"""How a page shows work running in a worker process (:mod:`ui.jobs`): the estimate,
a progress bar that refreshes itself, a Cancel button; reruns the page when done."""

from __future__ import annotations

import streamlit as st

from ui import jobs
from ui.errors import escape_md
from ui.fmt import fmt_seconds

#: Seconds between progress refreshes.
POLL_S = 0.3


def _cancelled_key(slot: str) -> str:
    return f"_job_cancelled_{slot}"


def was_cancelled(slot: str, key: str) -> bool:
    """Whether this session cancelled the job for ``key`` in ``slot`` (so the page must
    not start it again on its own)."""
    return st.session_state.get(_cancelled_key(slot)) == key


def show_cancelled(slot: str, what: str) -> None:
    st.info(f"{what}: cancelled.")
    if st.button("Run it again", key=f"{slot}_rerun_job"):
        st.session_state.pop(_cancelled_key(slot), None)
        st.rerun()


def show_job(pending) -> None:
    """The waiting/running panel of a :class:`ui.runs.Pending` job."""
    job, slot, what = pending.job, pending.slot, pending.what
    m = jobs.manager()
    sid = jobs.session_id()
    est = f"about {fmt_seconds(job.estimate_s)}" if job.estimate_s is not None else "unknown"
    st.info(f"**{what}** runs in a background process (estimated {est}, {jobs.estimate_basis(job.kind)}). "
            "The page updates when it is done; other pages stay usable.")

    @st.fragment(run_every=POLL_S)
    def _progress():
        if job.finished:
            st.rerun(scope="app")
        if job.state == "waiting":
            pos = m.queue_position(job)
            st.progress(0.0, text=f"waiting for a free worker: position {pos} in the queue, "
                                  f"{jobs.MAX_RUNNING} job(s) run at once")
        else:
            text = job.text or "running (the simulator reports progress as each op finishes)"
            st.progress(job.fraction, text=f"{text} ({fmt_seconds(job.elapsed_s)} elapsed)")
        if st.button("Cancel", key=f"{slot}_cancel_job", type="secondary"):
            m.cancel(sid, slot)
            st.session_state[_cancelled_key(slot)] = job.key
            st.rerun(scope="app")

    _progress()


def show_failed(pending) -> None:
    job = pending.job
    st.error(escape_md(f"{pending.what}: {job.error}"))
    if job.detail:
        with st.expander("Details (for a bug report)"):
            st.code(job.detail)
    if st.button("Try again", key=f"{pending.slot}_retry_job"):
        jobs.manager().forget(job.key)
        st.rerun()


def resolve(result):
    """``result`` of :func:`ui.runs.run_work`: returns the view when ready; otherwise
    draws the job's panel and returns ``None`` (the page should stop drawing)."""
    from ui.runs import Pending

    if not isinstance(result, Pending):
        return result
    job = result.job
    if job.state == "cancelled" and was_cancelled(result.slot, job.key):
        show_cancelled(result.slot, result.what)
        return None
    if job.state == "error":
        show_failed(result)
        return None
    if job.state == "done":
        return job.result
    show_job(result)
    return None
