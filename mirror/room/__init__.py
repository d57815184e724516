"""A worker's room, seen from its API server only: what a Job's pod asks for, what each node
has free, and whether the pod fits — pure functions, so placement can be table-tested."""
