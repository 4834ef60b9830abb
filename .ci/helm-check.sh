#!/usr/bin/env bash
# Chart check for helm/nova-gateway (GitHub issue 6):
#   1. values.schema.json: its `config` part matches src/config/schema.ts; values.yaml and ci/*.yaml
#      are valid, the schema-level broken files are rejected, README.md documents every value (no helm needed)
#   2. helm lint --strict on the default values and on every ci/*.yaml
#   3. helm template of each into a temp dir
#   4. every helm/test-values/*.yaml (deliberately broken) must be REJECTED, for the stated reason
#   5. scripts/check-manifests.ts: kubernetes-models validation + the chart's invariants on the renders
#   6. scripts/check-metric-names.ts: every metric the dashboard and the PrometheusRule use is one the gateway exports
# helm: `helm` v3 on PATH, else .tools/bin/helm, else built with `go install` (pinned below) into
# .tools/bin. If helm cannot be had, steps 2-5 are SKIPPED with a loud warning and the script exits 0
# (unless step 1 failed). Any other failure: exit 1 after running every step.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
CHART=helm/nova-gateway
BROKEN=helm/test-values
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KUBE_VERSION=${KUBE_VERSION:-1.31.0}
TOOLS=$ROOT/.tools/bin
RELEASE=nova-gateway
NAMESPACE=nova

status=0
section() { printf '\n==== %s\n' "$*"; }

# --- 1. values vs schema, without helm ---------------------------------------------------------
section "values.schema.json: config part in sync with src/config/schema.ts"
if ! npx --no-install tsx scripts/sync-chart-config-schema.ts; then
  status=1
fi
section "values.schema.json (ajv)"
if ! npx --no-install tsx scripts/check-chart-values.ts "$CHART" "$BROKEN"; then
  status=1
fi

# --- helm ----------------------------------------------------------------------------------------
is_helm3() { "$1" version --short 2>/dev/null | grep -q '^v3\.'; }

find_helm() {
  if command -v helm >/dev/null 2>&1 && is_helm3 "$(command -v helm)"; then
    HELM=$(command -v helm)
    return 0
  fi
  if [ -x "$TOOLS/helm" ] && is_helm3 "$TOOLS/helm"; then
    HELM=$TOOLS/helm
    return 0
  fi
  local go
  go=$(command -v go || true)
  if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
  if [ -z "$go" ]; then
    echo "no helm v3 on PATH or in .tools/bin, and no Go to build it" >&2
    return 1
  fi
  echo "building helm $HELM_VERSION into .tools/bin with $go (takes a few minutes, once)"
  mkdir -p "$TOOLS"
  if GOBIN=$TOOLS "$go" install \
      -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" && is_helm3 "$TOOLS/helm"; then
    HELM=$TOOLS/helm
    return 0
  fi
  return 1
}

section "helm"
if ! find_helm; then
  cat >&2 <<WARN

######################################################################################
WARNING: helm could not be built (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed)
WARNING: and no helm v3 is on PATH or in .tools/bin.
WARNING: chart lint/template SKIPPED; manifest validation SKIPPED.
WARNING: only the values/schema check above ran.
######################################################################################
WARN
  exit "$status"
fi
echo "using $HELM ($("$HELM" version --short)), --kube-version $KUBE_VERSION"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
COMMON=(--kube-version "$KUBE_VERSION")
mkdir -p "$WORK/renders"

# --- 2 + 3. lint and render the default values and every ci/*.yaml ------------------------------
VALUE_SETS=(default)
for f in "$CHART"/ci/*.yaml; do VALUE_SETS+=("$f"); done

for set in "${VALUE_SETS[@]}"; do
  args=()
  name=default
  if [ "$set" != default ]; then
    args=(-f "$set")
    name=$(basename "$set" .yaml)
  fi
  section "lint + template: $name"
  "$HELM" lint --strict "$CHART" "${COMMON[@]}" "${args[@]}"
  "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" "${COMMON[@]}" "${args[@]}" \
    > "$WORK/renders/$name.yaml"
  echo "rendered $(grep -c '^kind:' "$WORK/renders/$name.yaml") objects -> renders/$name.yaml"
done

# --- 4. broken values must be rejected ------------------------------------------------------------
section "broken values must be rejected"
rejected_ok=1
for f in "$BROKEN"/*.yaml; do
  by=$(sed -n 's/^# rejected-by: \([a-z]*\).*/\1/p' "$f" | head -n1)
  expect=$(sed -n 's/^# error-contains: //p' "$f" | head -n1)
  if [ -z "$by" ] || [ -z "$expect" ]; then
    echo "FAIL $f: needs '# rejected-by: schema|template' and '# error-contains: ...' lines"
    rejected_ok=0
    continue
  fi
  if "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" "${COMMON[@]}" -f "$f" \
      > /dev/null 2> "$WORK/template.err"; then
    echo "FAIL $f: helm template ACCEPTED it"
    rejected_ok=0
    continue
  fi
  if ! grep -qF -- "$expect" "$WORK/template.err"; then
    echo "FAIL $f: helm template failed, but not with \"$expect\":"
    sed 's/^/       /' "$WORK/template.err"
    rejected_ok=0
    continue
  fi
  if [ "$by" = schema ]; then
    # `helm lint` only fails on schema errors (it reports template `fail` calls as INFO).
    if "$HELM" lint --strict "$CHART" "${COMMON[@]}" -f "$f" > "$WORK/lint.out" 2>&1; then
      echo "FAIL $f: helm lint ACCEPTED it"
      rejected_ok=0
      continue
    fi
    echo "ok   $f: rejected by helm lint and helm template: $expect"
  else
    echo "ok   $f: rejected by helm template: $expect"
  fi
done
if [ "$rejected_ok" != 1 ]; then
  echo "broken values files were not rejected as expected" >&2
  status=1
fi

# --- 5. validate the rendered manifests -----------------------------------------------------------
section "manifests (kubernetes-models + invariants)"
if ! npx --no-install tsx scripts/check-manifests.ts "$WORK"/renders/*.yaml; then
  status=1
fi

# --- 6. dashboards and alerts use only metrics the gateway exports --------------------------------
section "metric names in the Grafana dashboard and the PrometheusRule"
if ! npx --no-install tsx scripts/check-metric-names.ts "$WORK"/renders/*.yaml; then
  status=1
fi

if [ "$status" = 0 ]; then
  section "helm-check: OK"
else
  section "helm-check: FAILED (see above)"
fi
exit "$status"
