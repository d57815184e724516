"""A simulated fleet for the benchmarks: fake Kubernetes API servers, one per cluster, in one process.

A simulation, labelled so wherever its figures go: the real controller process runs against HTTP
API servers that hold their objects in memory (:mod:`.store`), serve them as kube-apiserver does
(:mod:`.server`), and run Jobs on the workers with a fake Job controller and kubelet
(:mod:`.jobsim`), so a fleet of 50 workers with 20,000 pods each fits on one machine and the
controller's CPU, memory and event-loop lag are measured alone. ``python -m bench.fleetsim``
starts it (:mod:`.main`).
"""
