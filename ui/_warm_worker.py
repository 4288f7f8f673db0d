"""Imported by the fork server of :mod:`ui.jobs` (``set_forkserver_preload``): runs
:func:`ui.work.warm` once there, so every job worker forked from it starts warm.
Any failure is ignored (a cold worker is only slower)."""

try:
    from ui.work import warm

    warm()
except Exception:  # noqa: BLE001 - never break the fork server
    pass
