#!/bin/sh
# Checks the Helm chart offline (`npm run check:chart`; CI runs it):
#   1. helm lint --strict with each values file in helm/keyroll/ci/;
#   2. helm template with each of them, every rendered manifest validated against the
#      Kubernetes schemas (strict: unknown fields are errors), the Pod Security Standard
#      "restricted", and the policy schema (helm/tests/validate_manifests.py);
#   3. every file in helm/tests/must-fail/ must FAIL at the stage it names (`# expect-stage:
#      values` — the values schema rejects it; `# expect-stage: manifest` — it renders, and the
#      rendered manifest is rejected) with the error it names (`# expect-error: …`). A must-fail
#      file that passes fails the check: it proves the checks above can fail at all.
#   3b. the keyroll.io CRDs (helm/keyroll/crds/, installed by helm itself, not templated, and the
#      plain bundle deploy/crds/keyroll.io.yaml) against the CustomResourceDefinition schema of the
#      same Kubernetes version; that the API server accepts them (structural, CEL within budget) is
#      test/integration/kube-crds.test.ts's;
#   4. the alert rules: `promtool check rules` on config/prometheus-rules.yaml and on the groups of
#      every rendered PrometheusRule (which must equal the plain file's, checked in step 2), and
#      `promtool test rules` with the unit tests of every alert (helm/tests/prometheus-rules.test.yaml).
# Quiet on success: the last line is the summary. Tools: scripts/lib/chart-tools.sh.
set -eu
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/chart-tools.sh

KUBERNETES_VERSION="${KEYROLL_KUBERNETES_VERSION:-1.31.0}"
chart=helm/keyroll
release=keyroll-check
namespace=keyroll

helm=$(keyroll_helm)
python=$(keyroll_validator_python)
promtool=$(keyroll_promtool)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

problems=0
problem() {
  echo "chart: FAIL $*" >&2
  problems=$((problems + 1))
}

# Runs a command, keeping its output in $work/out; shows the output only when it fails.
quietly() {
  if "$@" >"$work/out" 2>&1; then return 0; fi
  sed 's/^/  | /' "$work/out" >&2
  return 1
}

# helm template knows no cluster: its .Capabilities.APIVersions lists group/versions only, so the
# chart's ValidatingAdmissionPolicy (rendered where the API server serves the kind) is asked for,
# as a Kubernetes 1.30+ API server's discovery would list it.
API_VERSIONS="admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"

render() { # values-file output-file
  "$helm" template "$release" "$chart" --namespace "$namespace" --kube-version "$KUBERNETES_VERSION" \
    --api-versions "$API_VERSIONS" --values "$1" >"$2" 2>"$work/render.err"
}

validate() { # rendered files…
  "$python" helm/tests/validate_manifests.py --kubernetes-version "$KUBERNETES_VERSION" \
    --schemas helm/tests/schemas --policy-schema config/policy.schema.json "$@"
}

header() { # file key → the value of a `# key: value` comment line
  sed -n "s/^# $2: *//p" "$1" | head -n 1
}

# ---- 1 + 2: the values files that must pass.
values_files=0
rendered=""
for values in "$chart"/ci/*-values.yaml; do
  values_files=$((values_files + 1))
  name=$(basename "$values" -values.yaml)
  quietly "$helm" lint --strict "$chart" --namespace "$namespace" --kube-version "$KUBERNETES_VERSION" --values "$values" \
    || problem "helm lint with $values"
  if render "$values" "$work/$name.yaml"; then
    rendered="$rendered $work/$name.yaml"
  else
    sed 's/^/  | /' "$work/render.err" >&2
    problem "helm template with $values"
  fi
done
manifests=0
mkdir "$work/rules"
if [ -n "$rendered" ]; then
  # shellcheck disable=SC2086 # one path per word, none with spaces (mktemp + fixed names)
  if validate --rules-file config/prometheus-rules.yaml --extract-rules "$work/rules" $rendered >"$work/validate.out" 2>&1; then :; else
    grep -v '^manifests=' "$work/validate.out" | sed "s|$work/||" >&2
    problem "rendered manifests do not validate against Kubernetes $KUBERNETES_VERSION"
  fi
  manifests=$(sed -n 's/^manifests=//p' "$work/validate.out")
fi

# ---- 2b: what the defaults must render: a NetworkPolicy (nothing reaches keyroll pods unless
# daemonIngressFrom says so); and with consumerAccess, the ValidatingAdmissionPolicy and binding
# that keep keyroll's patches to its own annotations (docs/kubernetes.md, "What keyroll may change").
if [ -f "$work/defaults.yaml" ]; then
  grep -q '^kind: NetworkPolicy$' "$work/defaults.yaml" || problem "the defaults render no NetworkPolicy"
fi
if [ -f "$work/consumers.yaml" ]; then
  grep -q '^kind: ValidatingAdmissionPolicy$' "$work/consumers.yaml" || problem "consumerAccess renders no ValidatingAdmissionPolicy"
  grep -q '^kind: ValidatingAdmissionPolicyBinding$' "$work/consumers.yaml" || problem "consumerAccess renders no ValidatingAdmissionPolicyBinding"
fi

# ---- 3: the values files that must fail, each at its stage, with its error.
caught=0
caught_values=0
caught_manifest=0
for values in helm/tests/must-fail/*-values.yaml; do
  stage=$(header "$values" expect-stage)
  expected=$(header "$values" expect-error)
  [ -n "$stage" ] && [ -n "$expected" ] || { problem "$values lacks '# expect-stage:' or '# expect-error:'"; continue; }
  case "$stage" in
    values)
      if render "$values" "$work/must-fail.yaml"; then
        problem "$values rendered, but the values schema must reject it"
      elif grep -q -- "$expected" "$work/render.err"; then
        caught_values=$((caught_values + 1))
      else
        sed 's/^/  | /' "$work/render.err" >&2
        problem "$values failed to render, but not with '$expected'"
      fi
      ;;
    manifest)
      if ! render "$values" "$work/must-fail.yaml"; then
        sed 's/^/  | /' "$work/render.err" >&2
        problem "$values must render (and then fail validation), but helm template failed"
      elif validate "$work/must-fail.yaml" >"$work/validate.out" 2>&1; then
        problem "$values rendered a manifest the Kubernetes schema must reject, and it passed"
      elif grep '^ERROR' "$work/validate.out" | grep -q -- "$expected"; then
        caught_manifest=$((caught_manifest + 1))
      else
        sed 's/^/  | /' "$work/validate.out" >&2
        problem "$values failed validation, but not with '$expected'"
      fi
      ;;
    *) problem "$values: unknown expect-stage '$stage' (values or manifest)" ;;
  esac
done

# ---- 3b: the CRDs helm installs from crds/ (helm template leaves them out) and the plain bundle.
crd_files=$(find "$chart/crds" deploy/crds -name '*.yaml' | sort)
[ -n "$crd_files" ] || problem "no CRD files in $chart/crds/ or deploy/crds/"
# shellcheck disable=SC2086 # one path per word, none with spaces (generated names)
if validate $crd_files >"$work/crds.out" 2>&1; then
  crds=$(sed -n 's/^manifests=//p' "$work/crds.out")
else
  grep -v '^manifests=' "$work/crds.out" >&2
  problem "the CRDs do not validate against Kubernetes $KUBERNETES_VERSION"
  crds=0
fi

# ---- 4: the alert rules, by Prometheus' own checker.
rule_files=$(find "$work/rules" -name '*.rules.yaml' | sort)
[ -n "$rule_files" ] || problem "no values file renders a PrometheusRule"
# shellcheck disable=SC2086 # one path per word, none with spaces
quietly "$promtool" check rules config/prometheus-rules.yaml $rule_files || problem "promtool check rules"
rule_tests=$(grep -c '^  - name:' helm/tests/prometheus-rules.test.yaml)
quietly "$promtool" test rules helm/tests/prometheus-rules.test.yaml || problem "promtool test rules helm/tests/prometheus-rules.test.yaml"

# Both kinds of check must have shown that they can fail.
[ "$caught_values" -gt 0 ] || problem "no must-fail file was caught by the values schema"
[ "$caught_manifest" -gt 0 ] || problem "no must-fail file was caught by manifest validation"
caught=$((caught_values + caught_manifest))

if [ "$problems" -gt 0 ]; then
  echo "chart: $problems problem(s); $manifests manifests rendered across $values_files values files" >&2
  exit 1
fi
echo "chart: $manifests manifests valid against Kubernetes $KUBERNETES_VERSION across $values_files values files, $crds CRDs, $caught expected failures caught; alert rules pass promtool check and $rule_tests rule tests"
