#!/usr/bin/env bash
# Print (on stdout) a kubeconfig that lets the jobmirror controller act in ONE worker
# cluster as the jobmirror-worker ServiceAccount of deploy/worker/ — never as an admin.
#
#   deploy/worker/make-kubeconfig.sh --name worker-1 --kubeconfig ~/.kube/worker-1 \
#       [--context CTX] [--server https://ADDRESS:6443] [--duration 8760h | --token-secret] \
#       > worker-1.kubeconfig
#
# --kubeconfig/--context: an identity allowed to create ServiceAccount tokens in the
#   worker's jobmirror-system namespace (typically the worker admin).
# --server: the worker API server URL as the CONTROLLER reaches it (e.g. from inside the
#   manager cluster); default: the server of that kubeconfig.
# --duration: lifetime of a TokenRequest token (default 8760h; the API server may cap it).
# --token-secret: use the non-expiring token of deploy/worker/long-lived-token.yaml instead.
# Progress goes to stderr; only the kubeconfig goes to stdout.
set -euo pipefail

name=""
kubeconfig=""
context=""
server=""
duration="8760h"
token_secret=0
namespace="jobmirror-system"
sa="jobmirror-worker"

usage() { sed -n '2,18p' "$0" >&2; exit 2; }
log() { printf '[make-kubeconfig] %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --name) name="$2"; shift 2 ;;
    --kubeconfig) kubeconfig="$2"; shift 2 ;;
    --context) context="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --token-secret) token_secret=1; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[ -n "$name" ] || { log "--name is required"; usage; }

kc=(kubectl)
[ -n "$kubeconfig" ] && kc+=(--kubeconfig "$kubeconfig")
[ -n "$context" ] && kc+=(--context "$context")

if [ -z "$server" ]; then
  server=$("${kc[@]}" config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
fi
ca_data=$("${kc[@]}" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
if [ -z "$ca_data" ]; then
  ca_file=$("${kc[@]}" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')
  [ -n "$ca_file" ] || { log "the kubeconfig has no cluster CA; refusing to write an insecure kubeconfig"; exit 1; }
  ca_data=$(base64 < "$ca_file" | tr -d '\n')
fi

log "checking ServiceAccount $namespace/$sa (apply deploy/worker/ first)"
"${kc[@]}" get serviceaccount "$sa" -n "$namespace" -o name >&2

if [ "$token_secret" = 1 ]; then
  log "reading the long-lived token from Secret $namespace/jobmirror-worker-token"
  token=""
  for _ in $(seq 1 30); do
    token=$("${kc[@]}" get secret jobmirror-worker-token -n "$namespace" -o jsonpath='{.data.token}')
    [ -n "$token" ] && break
    sleep 1
  done
  [ -n "$token" ] || { log "Secret jobmirror-worker-token has no token (applied long-lived-token.yaml?)"; exit 1; }
  token=$(printf '%s' "$token" | base64 --decode)
else
  log "requesting a token for $namespace/$sa valid for $duration (TokenRequest API)"
  token=$("${kc[@]}" create token "$sa" -n "$namespace" --duration "$duration")
fi

log "kubeconfig for worker $name: server $server, user $namespace/$sa"
cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ${name}
  cluster:
    server: ${server}
    certificate-authority-data: ${ca_data}
users:
- name: jobmirror-worker@${name}
  user:
    token: ${token}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: jobmirror-worker@${name}
current-context: ${name}
KUBECONFIG
