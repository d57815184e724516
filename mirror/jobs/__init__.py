"""The ``batch/v1`` Job kind: its copy, its status translation, its pods. Only the wiring names it."""
