"""The ``jobset.x-k8s.io/v1alpha2`` JobSet kind: its copy, its status translation, its pods."""
