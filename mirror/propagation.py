"""Moved to mirror/status_lag.py; kept until mirror/reconciler.py and mirror/controller.py import from there."""
from mirror.status_lag import StatusLag, interim_hold, newly_decided, status_changed  # noqa: F401
