#!/usr/bin/env bash
# jobmirror e2e on kind: a manager and one worker (the manager is also a worker,
# KEP-4368 Story 1) or, with --workers 2, a manager and two workers; the image built
# and loaded, deploy/ applied with real worker credentials, and the e2e suite run with
# JOBMIRROR_E2E_PROVIDER=kind. Step-by-step explanation: e2e/kind/README.md.
#
# Usage: e2e/kind/run.sh [options] [-- pytest args...]
#   --workers N       1 (default: manager + worker-1, manager also a worker) or 2
#   --keep            keep the clusters afterwards (default: delete them, even on failure)
#   --no-build        do not run `docker build` (the image must exist locally)
#   --no-tests        stop after the deployment is rolled out (implies --keep)
#   --image REF       image reference with a tag (default jobmirror:e2e; env JOBMIRROR_IMAGE)
#   --node-image REF  kind node image, Kubernetes >= 1.32 (default: kind's; env KIND_NODE_IMAGE)
#   --prefix NAME     cluster name prefix (default jobmirror; env JOBMIRROR_KIND_PREFIX)
# Environment: PYTHON (default .venv/bin/python, else python3), JOBMIRROR_KIND_WORKDIR
# (default e2e/kind/.work), KIND_EXPERIMENTAL_DOCKER_NETWORK (default kind).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/e2e/kind"
PREFIX=${JOBMIRROR_KIND_PREFIX:-jobmirror}
IMAGE=${JOBMIRROR_IMAGE:-jobmirror:e2e}
NODE_IMAGE=${KIND_NODE_IMAGE:-}
NETWORK=${KIND_EXPERIMENTAL_DOCKER_NETWORK:-kind}
WORK=${JOBMIRROR_KIND_WORKDIR:-$HERE/.work}
WORKERS=1
KEEP=0
BUILD=1
RUN_TESTS=1
PYTEST_ARGS=()

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
step() { printf '\n==> %s\n' "$*" >&2; }
run() { printf '+ %s\n' "$*" >&2; "$@"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-tests) RUN_TESTS=0; KEEP=1; shift ;;
    --image) IMAGE="${2:-}"; shift 2 ;;
    --node-image) NODE_IMAGE="${2:-}"; shift 2 ;;
    --prefix) PREFIX="${2:-}"; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    *) printf 'unknown argument: %s\n' "$1" >&2; usage ;;
  esac
done
case "$WORKERS" in 1|2) ;; *) die "--workers must be 1 or 2, not '$WORKERS'" ;; esac
case "$IMAGE" in *:*) ;; *) die "--image needs an explicit tag (e.g. jobmirror:e2e), got '$IMAGE'" ;; esac
IMAGE_NAME=${IMAGE%:*}
IMAGE_TAG=${IMAGE##*:}
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

MANAGER="$PREFIX-manager"
WORKER_CLUSTERS=("$PREFIX-worker-1")
[ "$WORKERS" = 2 ] && WORKER_CLUSTERS+=("$PREFIX-worker-2")
ALL_CLUSTERS=("$MANAGER" "${WORKER_CLUSTERS[@]}")
OVERLAY="$WORK/overlay"

kc() { printf '%s/%s.kubeconfig' "$WORK" "$1"; }            # admin kubeconfig of a cluster
k() { local c="$1"; shift; run kubectl --kubeconfig "$(kc "$c")" "$@"; }

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -f "$(kc "$MANAGER")" ]; then
    step "FAILED (exit $rc): diagnostics from the manager"
    kubectl --kubeconfig "$(kc "$MANAGER")" get pods,deploy,lease -n jobmirror-system -o wide >&2 || true
    kubectl --kubeconfig "$(kc "$MANAGER")" get events -n jobmirror-system --sort-by=.lastTimestamp >&2 || true
    kubectl --kubeconfig "$(kc "$MANAGER")" logs -n jobmirror-system -l app.kubernetes.io/name=jobmirror \
      --all-containers --prefix --tail=200 >&2 || true
  fi
  if [ "$KEEP" = 1 ]; then
    step "kept: clusters ${ALL_CLUSTERS[*]}; admin kubeconfigs in $WORK"
    printf '  delete them with: kind delete clusters %s\n' "${ALL_CLUSTERS[*]}" >&2
  else
    step "deleting the kind clusters"
    for c in "${ALL_CLUSTERS[@]}"; do run kind delete cluster --name "$c" || true; done
  fi
  exit "$rc"
}

step "0. prerequisites: docker (engine running), kind, kubectl, $PYTHON with the test dependencies"
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found in PATH (see e2e/kind/README.md)"
done
run docker info --format 'docker engine {{.ServerVersion}}' || die "no Docker engine reachable"
run kind version
run kubectl version --client
run "$PYTHON" -c 'import pytest, pytest_asyncio, kruntime.client' \
  || die "$PYTHON cannot import the test dependencies: run 'make e2e' once or 'pip install -e .[test]'"
run mkdir -p "$WORK" "$OVERLAY"
trap cleanup EXIT

step "1. kind clusters: ${ALL_CLUSTERS[*]}"
for c in "${ALL_CLUSTERS[@]}"; do
  config="$HERE/worker.yaml"
  [ "$c" = "$MANAGER" ] && config="$HERE/manager.yaml"
  if kind get clusters 2>/dev/null | grep -qx "$c"; then
    printf '  %s exists: reusing it\n' "$c" >&2
  else
    args=(create cluster --name "$c" --config "$config" --wait 180s --kubeconfig "$(kc "$c")")
    [ -n "$NODE_IMAGE" ] && args+=(--image "$NODE_IMAGE")
    run kind "${args[@]}"
  fi
  # A kubeconfig of its own per cluster: ~/.kube/config is never touched.
  run kind get kubeconfig --name "$c" > "$(kc "$c")"
  minor=$(kubectl --kubeconfig "$(kc "$c")" get --raw /version \
    | "$PYTHON" -c 'import json, sys; v = json.load(sys.stdin); print(v["minor"].rstrip("+"))')
  [ "$minor" -ge 32 ] || die "$c runs Kubernetes 1.$minor; jobmirror needs >= 1.32 (JobManagedBy): use --node-image"
done

step "2. build the image $IMAGE"
if [ "$BUILD" = 1 ]; then
  run docker build -t "$IMAGE" "$ROOT"
else
  run docker image inspect "$IMAGE" --format '{{.Id}}' >/dev/null || die "--no-build but $IMAGE does not exist"
fi

step "3. load $IMAGE into every cluster (controller and the e2e Jobs' pods both use it)"
for c in "${ALL_CLUSTERS[@]}"; do run kind load docker-image "$IMAGE" --name "$c"; done

step "4. worker RBAC (deploy/worker/) and in-cluster-reachable worker kubeconfigs"
WORKER_FILES=()
E2E_WORKERS=""
i=0
for c in "${WORKER_CLUSTERS[@]}"; do
  i=$((i + 1))
  name="worker-$i"
  k "$c" apply -k "$ROOT/deploy/worker"
  # The manager's pods reach this API server by its node's IP on the kind network
  # (`kind get kubeconfig --internal` would give https://$c-control-plane:6443 instead).
  ip=$(docker inspect -f "{{ (index .NetworkSettings.Networks \"$NETWORK\").IPAddress }}" "$c-control-plane")
  [ -n "$ip" ] || die "no IP for $c-control-plane on docker network $NETWORK"
  run "$ROOT/deploy/worker/make-kubeconfig.sh" --name "$name" --kubeconfig "$(kc "$c")" \
    --server "https://$ip:6443" --duration 24h > "$OVERLAY/$name.kubeconfig"
  WORKER_FILES+=("$name.kubeconfig")
  E2E_WORKERS+="${E2E_WORKERS:+,}$name=$(kc "$c")"
done

if [ "$WORKERS" = 1 ]; then
  BASE="$ROOT/deploy/manager-as-worker"   # workers: manager (in-cluster identity) + worker-1
  MANAGER_WORKER=manager
  E2E_WORKERS+=",manager=$(kc "$MANAGER")"
else
  BASE="$ROOT/deploy"                     # workers: worker-1 + worker-2
  MANAGER_WORKER=""
fi

step "5. kustomize overlay $OVERLAY: $(basename "$BASE") + image $IMAGE + the worker kubeconfig Secret"
base_rel=$("$PYTHON" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$BASE" "$OVERLAY")
{
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
  printf 'resources:\n- %s\n' "$base_rel"
  printf 'images:\n- name: jobmirror\n  newName: %s\n  newTag: "%s"\n' "$IMAGE_NAME" "$IMAGE_TAG"
  printf 'secretGenerator:\n- name: jobmirror-worker-kubeconfigs\n  namespace: jobmirror-system\n'
  printf '  behavior: replace\n  files:\n'
  for f in "${WORKER_FILES[@]}"; do printf '  - %s\n' "$f"; done
} > "$OVERLAY/kustomization.yaml"
cat "$OVERLAY/kustomization.yaml" >&2

step "6. apply to the manager: namespace, server-side dry run, then for real"
k "$MANAGER" apply -f "$ROOT/deploy/manager/namespace.yaml"
k "$MANAGER" apply -k "$OVERLAY" --dry-run=server
k "$MANAGER" apply -k "$OVERLAY"

step "7. wait for the rollout (2 replicas) and a leader"
k "$MANAGER" rollout status deployment/jobmirror-controller -n jobmirror-system --timeout=300s
holder=""
for _ in $(seq 1 60); do
  holder=$(kubectl --kubeconfig "$(kc "$MANAGER")" get lease jobmirror-controller -n jobmirror-system \
    -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [ -n "$holder" ] && break
  sleep 2
done
[ -n "$holder" ] || die "no replica acquired Lease jobmirror-system/jobmirror-controller"
printf '  leader: %s\n' "$holder" >&2

export JOBMIRROR_E2E_PROVIDER=kind
export JOBMIRROR_E2E_MANAGER_KUBECONFIG
JOBMIRROR_E2E_MANAGER_KUBECONFIG=$(kc "$MANAGER")
export JOBMIRROR_E2E_WORKERS="$E2E_WORKERS"
export JOBMIRROR_E2E_MANAGER_WORKER="$MANAGER_WORKER"
export JOBMIRROR_E2E_KUSTOMIZATION="$OVERLAY"
export JOBMIRROR_E2E_KUBECTL
JOBMIRROR_E2E_KUBECTL=$(command -v kubectl)
export JOBMIRROR_E2E_POD_IMAGE="$IMAGE"

if [ "$RUN_TESTS" = 0 ]; then
  step "deployed (--no-tests). Run the suite against it with:"
  for v in PROVIDER MANAGER_KUBECONFIG WORKERS MANAGER_WORKER KUSTOMIZATION KUBECTL POD_IMAGE; do
    n="JOBMIRROR_E2E_$v"
    printf '  export %s=%q\n' "$n" "${!n}" >&2
  done
  printf '  cd %s && %s -m pytest -m e2e e2e\n' "$ROOT" "$PYTHON" >&2
  exit 0
fi

step "8. e2e suite, provider kind"
env | grep '^JOBMIRROR_E2E_' | sort >&2
cd "$ROOT"
run "$PYTHON" -m pytest -m e2e e2e ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"}
