"""The docs site's reference pages and the chart's README/schema, generated from the code (``python -m refdocs``).

A top-level package because it reads both controllers (their parsers and metrics): living in mirror/ made
mirror/ import builtin_controller/. Not installed with the package; it runs from the clone (``make docs``).
"""
