#!/usr/bin/env bash
# Re-record the tutorial's commands and output (docs/tutorial/multistep-deletion.md) on the local
# control plane: an empty folder with the example files, the stock operator, then kopf-outcomes.
# Run from a bootstrapped checkout: bash docs/tutorial/record.sh [OUT_DIR]. The transcript, both
# operators' logs and the object while it waits are written to OUT_DIR (default: a temp dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out" && out=$(cd "$out" && pwd)
export PATH="$root/.venv/bin:$PATH"
work=$(mktemp -d) && cd "$work"
eval "$(kopf-outcomes cluster env)"
mkdir -p examples/multistep_deletion
touch examples/__init__.py examples/multistep_deletion/__init__.py
cp "$root"/examples/multistep_deletion/{external_system,stock_example,example}.py examples/multistep_deletion/
cp "$root/examples/obj.yaml" obj.yaml
ns=tutorial-$RANDOM
show() { echo "\$ $*"; "$@"; }
cleanup() {
  python - "$ns" <<'PY'
import sys
from kopf_outcomes_testing.cluster import ensure_running
from kopf_outcomes_testing.namespaces import delete_namespace
delete_namespace(ensure_running().admin_client(), sys.argv[1])
PY
}
trap cleanup EXIT
story() {  # $1: the operator file, $2: a tag for the output files
  python -m examples.multistep_deletion.external_system --port 8088 --delay 15 --via status \
    > "$out/$2-external.log" 2>&1 &
  local external=$!
  sleep 2
  EXTERNAL_SYSTEM_URL=http://127.0.0.1:8088 KOPF_OUTCOMES_PLUGINS= \
    python -m kopf run --standalone --namespace "$ns" "$1" > "$out/$2-operator.log" 2>&1 &
  local operator=$!
  sleep 6
  show kubectl apply -n "$ns" -f obj.yaml
  sleep 3
  show kubectl get kex -n "$ns" kopf-example-1 -o jsonpath='{.metadata.finalizers}'; echo
  echo "\$ time kubectl delete -n $ns -f obj.yaml"
  { time kubectl delete -n "$ns" -f obj.yaml; } > "$out/$2-delete.log" 2>&1 &
  local deleting=$!
  sleep 5
  kubectl get kex -n "$ns" kopf-example-1 -o yaml > "$out/$2-waiting.yaml"
  wait "$deleting"; cat "$out/$2-delete.log"
  kill "$operator" "$external"; wait "$operator" "$external" || true
}
{
  show kubectl create namespace "$ns"
  story examples/multistep_deletion/stock_example.py stock
  story examples/multistep_deletion/example.py pending
} | tee "$out/transcript.txt"
echo "recorded in $out" >&2
