"""``python -m bench``: the performance benchmarks of DESIGN.md §6 on the local cluster bed.

Two benchmarks, each writing ``results/<name>.json`` and ``results/<name>.png``:

- ``mirror``: throughput, dispatch and status-propagation latency, API requests per Job,
  controller CPU and peak RSS of the mirror controller (manager + 2 kwok workers).
- ``builtin``: the builtin Job controller against kube-controller-manager's Job controller
  on the same workloads and the same client QPS/burst.

The pure parts (percentiles, Prometheus text, Kubernetes timestamps, /proc parsing) live in
their own modules and are unit-tested; everything else drives real clusters.
"""
