# shellcheck shell=sh
# Sourced by scripts/check-chart.sh: installs the chart-checking tools, once, into the cache
# shared by every clone (${KEYROLL_CACHE:-~/.cache/keyroll}), from the registries the machines
# reach:
#   helm: built from source with `go install` (the Go module proxy; scripts/lib/go-tools.sh
#         caches it); needs the Go toolchain. Building takes several minutes on two cores, so
#         each version is built once.
#   promtool: Prometheus' rule checker (`check rules`, `test rules` for the alert rules), built
#         and cached by scripts/lib/go-tools.sh (KEYROLL_PROMTOOL_VERSION v0.316.0 of the Go module
#         github.com/prometheus/prometheus is Prometheus 3.16.0).
#   kubernetes-validate: from PyPI into the project's venv; bundles the Kubernetes JSON schemas.
# Versions are pinned so every machine checks the chart the same way.
KEYROLL_HELM_VERSION="${KEYROLL_HELM_VERSION:-v3.22.0}"
KEYROLL_KUBERNETES_VALIDATE_VERSION="${KEYROLL_KUBERNETES_VALIDATE_VERSION:-1.37.0}"
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"
. scripts/lib/go-tools.sh

chart_tools_say() { echo "keyroll check-chart: $*" >&2; }

chart_tools_build_helm() { # out-dir
  GOBIN="$1" go install "helm.sh/helm/v3/cmd/helm@$KEYROLL_HELM_VERSION"
}

# Prints the path of a helm binary of the pinned version, building it when missing.
keyroll_helm() {
  helm_dir=$(keyroll_go_tool "helm-$KEYROLL_HELM_VERSION" chart_tools_build_helm helm) || return 1
  "$helm_dir/helm" version --short >/dev/null 2>&1 || { chart_tools_say "$helm_dir/helm does not run"; return 1; }
  echo "$helm_dir/helm"
}

# Prints the path of a promtool binary of the pinned version, building it when missing.
keyroll_promtool() {
  promtool_dir=$(keyroll_promtool_dir) || return 1
  "$promtool_dir/promtool" --version >/dev/null 2>&1 || { chart_tools_say "$promtool_dir/promtool does not run"; return 1; }
  echo "$promtool_dir/promtool"
}

# Prints the path of a Python that imports kubernetes_validate at the pinned version, installing
# it into the project's venv (the one scripts/test-servers.sh also uses) when missing.
keyroll_validator_python() {
  venv="$KEYROLL_CACHE/venv"
  stamp="$venv/.keyroll-kubernetes-validate-$KEYROLL_KUBERNETES_VALIDATE_VERSION"
  if [ ! -f "$stamp" ] || [ ! -x "$venv/bin/python" ]; then
    python=$(command -v python3 || command -v python) || {
      chart_tools_say "python3 is needed to install kubernetes-validate"
      return 1
    }
    mkdir -p "$KEYROLL_CACHE"
    (
      flock 9 2>/dev/null || true
      [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
      chart_tools_say "installing kubernetes-validate==$KEYROLL_KUBERNETES_VALIDATE_VERSION into $venv"
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "kubernetes-validate==$KEYROLL_KUBERNETES_VALIDATE_VERSION" >&2
    ) 9>"$KEYROLL_CACHE/.venv.lock" || { chart_tools_say "pip install kubernetes-validate failed"; return 1; }
    "$venv/bin/python" -c 'import kubernetes_validate, jsonschema, yaml' 2>/dev/null || {
      chart_tools_say "kubernetes_validate does not import in $venv"
      return 1
    }
    touch "$stamp"
  fi
  echo "$venv/bin/python"
}
