"""End-to-end suite: a manager and two workers, the controller with the identity and RBAC of deploy/."""
