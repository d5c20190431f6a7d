# shellcheck shell=sh
# Sourced by the scripts that need tools built from source through the Go module proxy (the only
# place this project's machines can get them from). Each tool is built once per pinned version
# into the cache shared by every clone, ${KEYROLL_CACHE:-~/.cache/keyroll}/tools/NAME-VERSION/,
# and reused from there; a fresh machine pays each build once.
#   helm            go install helm.sh/helm/v3/cmd/helm (scripts/lib/chart-tools.sh)
#   kube-apiserver  k8s.io/kubernetes/cmd/kube-apiserver, through a generated module (see below)
#   etcd            go.etcd.io/etcd/server/v3/etcdmain at the version kube-apiserver pins,
#                   built in the same module, so the two always match
#   promtool        go install github.com/prometheus/prometheus/cmd/promtool
#   kube-controller-manager  k8s.io/kubernetes/cmd/kube-controller-manager, through a generated
#                   module like kube-apiserver's (the real deployment and replicaset controllers)
#   external-secrets         the release's own module, built as the main module (see below)
#   reloader                 Stakater Reloader, the release's own module, built the same way
# Versions are pinned so every machine tests against the same tools. The Kubernetes minor matches
# the one scripts/check-chart.sh validates the chart against.
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"
KEYROLL_KUBE_VERSION="${KEYROLL_KUBE_VERSION:-v1.31.14}"
KEYROLL_PROMTOOL_VERSION="${KEYROLL_PROMTOOL_VERSION:-v0.316.0}"
# The external-secrets releases the consumer tests run for real: the newest that builds from the
# proxy, and the oldest that serves external-secrets.io/v1 (0.16.0 added v1, 0.17.0 dropped
# v1beta1). KEYROLL_ESO_CRDS_ONLY is a release whose CRD bundle alone is installed (it serves only
# v1beta1): the case where keyroll must not find v1; no controller of it is built.
KEYROLL_ESO_VERSIONS="${KEYROLL_ESO_VERSIONS:-v0.20.4 v0.16.2}"
KEYROLL_ESO_CRDS_ONLY="${KEYROLL_ESO_CRDS_ONLY:-v0.14.4}"
# Stakater Reloader: the only recent release the Go module proxy serves (v1.4.20, v1.4.21 and every
# earlier v1.4.x tried answer "403 This module version is not available"). The checksum database
# has no entry for it (404), so its module hash is pinned here instead: the h1: sum of the proxy's
# zip, whose files were checked identical to the tag v1.4.19 (commit 430c1efb) on GitHub.
KEYROLL_RELOADER_VERSION="${KEYROLL_RELOADER_VERSION:-v1.4.19}"
KEYROLL_RELOADER_SUM="${KEYROLL_RELOADER_SUM:-h1:7FAMofI7r9iY7IHZ8E3OSuGxEG7g9X8TuiM7ZK45RS8=}"
KEYROLL_RELOADER_OPENSHIFT_API="${KEYROLL_RELOADER_OPENSHIFT_API:-v0.0.0-20260326111139-30c2ef7a272e}"

go_tools_say() { echo "keyroll tools: $*" >&2; }

# go_tools_has DIR "BIN…": every named binary is an executable file in DIR.
go_tools_has() {
  for go_tools_bin in $2; do
    [ -x "$1/$go_tools_bin" ] || return 1
  done
}

# keyroll_go_tool NAME-VERSION BUILD "BIN…": prints $KEYROLL_CACHE/tools/NAME-VERSION, first
# running the shell function BUILD with an empty directory as its argument when a binary is
# missing. The build goes to a temporary directory that is renamed into place only when every
# binary is in it, so an interrupted build leaves nothing a later run would take for a tool.
keyroll_go_tool() {
  go_tool_dir="$KEYROLL_CACHE/tools/$1"
  if ! go_tools_has "$go_tool_dir" "$3"; then
    command -v go >/dev/null 2>&1 || {
      go_tools_say "$1 is not in $go_tool_dir and there is no Go toolchain to build it (install Go >= 1.26)"
      return 1
    }
    mkdir -p "$KEYROLL_CACHE/tools"
    # Serialized: two runs started at once would build the same binaries twice.
    (
      flock 9 2>/dev/null || true
      go_tools_has "$go_tool_dir" "$3" && exit 0
      go_tool_tmp=$(mktemp -d "$go_tool_dir.building.XXXXXX") || exit 1
      trap 'rm -rf "$go_tool_tmp"' EXIT
      go_tools_say "building $1 into $go_tool_dir (minutes, once per machine)"
      go_tool_started=$(date +%s)
      "$2" "$go_tool_tmp" >&2 || exit 1
      go_tools_has "$go_tool_tmp" "$3" || { go_tools_say "the build of $1 made no $3"; exit 1; }
      chmod 755 "$go_tool_tmp"
      if [ ! -e "$go_tool_dir" ]; then
        mv "$go_tool_tmp" "$go_tool_dir"
      else
        # A directory left without its binaries (by hand, or by an older script): fill it in,
        # the binaries last, rather than delete what someone else may be writing to.
        for go_tool_entry in "$go_tool_tmp"/*; do
          case " $3 " in *" ${go_tool_entry##*/} "*) continue ;; esac
          rm -rf "${go_tool_dir:?}/${go_tool_entry##*/}" && mv "$go_tool_entry" "$go_tool_dir/"
        done
        for go_tools_bin in $3; do mv -f "$go_tool_tmp/$go_tools_bin" "$go_tool_dir/"; done
      fi
      go_tools_say "built $1 in $(($(date +%s) - go_tool_started)) s"
    ) 9>"$KEYROLL_CACHE/tools/.$1.lock" || { go_tools_say "building $1 failed"; return 1; }
  fi
  echo "$go_tool_dir"
}

# kube-apiserver cannot be built with `go install k8s.io/kubernetes/cmd/kube-apiserver@VERSION`:
# k8s.io/kubernetes's go.mod replaces every k8s.io staging module (k8s.io/api, k8s.io/apiserver,
# …) with a directory inside its own repository, and `go install` refuses a module with replace
# directives. The staging modules are published on their own as v0.MINOR.PATCH for Kubernetes
# v1.MINOR.PATCH, so a small module that requires k8s.io/kubernetes and replaces each of them with
# that published version builds the same code. The list of staging modules is read from
# k8s.io/kubernetes's own go.mod, so another KEYROLL_KUBE_VERSION needs no edit here. Static
# binaries (CGO_ENABLED=0, as Kubernetes releases them), without symbol tables (smaller, faster link).
# go_tools_kube_gomod: prints the path of k8s.io/kubernetes@$KEYROLL_KUBE_VERSION's go.mod.
go_tools_kube_gomod() {
  kube_gomod=$(go mod download -json "k8s.io/kubernetes@$KEYROLL_KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [ -f "$kube_gomod" ] || { go_tools_say "the Go module proxy has no k8s.io/kubernetes@$KEYROLL_KUBE_VERSION"; return 1; }
  echo "$kube_gomod"
}

go_tools_build_kube() { # out-dir
  # The generated module stays beside the binaries (go.mod, go.sum): the record of what was built.
  kube_mod="$1/module"
  mkdir -p "$kube_mod" || return 1
  kube_gomod=$(go_tools_kube_gomod) || return 1
  kube_staging="v0.${KEYROLL_KUBE_VERSION#v1.}"
  kube_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kube_gomod")
  kube_etcd=$(sed -n 's|^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' "$kube_gomod")
  [ -n "$kube_etcd" ] || { go_tools_say "k8s.io/kubernetes@$KEYROLL_KUBE_VERSION's go.mod names no go.etcd.io/etcd/server/v3 version"; return 1; }
  {
    echo "// Generated by scripts/lib/go-tools.sh: builds kube-apiserver $KEYROLL_KUBE_VERSION and the etcd it pins."
    echo "module keyroll.test/kube-servers"
    echo
    echo "go $kube_go"
    echo
    echo "require k8s.io/kubernetes $KEYROLL_KUBE_VERSION"
    echo
    echo "replace ("
    sed -n "s|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|	\1 => \1 $kube_staging|p" "$kube_gomod"
    echo ")"
  } >"$kube_mod/go.mod"
  mkdir -p "$kube_mod/etcd"
  cat >"$kube_mod/etcd/main.go" <<'EOF'
// The etcd server, at the version k8s.io/kubernetes's go.mod pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  kube_minor=${KEYROLL_KUBE_VERSION#v1.}
  kube_minor=${kube_minor%%.*}
  (
    cd "$kube_mod" &&
      go get "k8s.io/kubernetes/cmd/kube-apiserver@$KEYROLL_KUBE_VERSION" "go.etcd.io/etcd/server/v3/etcdmain@$kube_etcd" &&
      CGO_ENABLED=0 go build -trimpath -o "$1/" \
        -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KEYROLL_KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean" \
        k8s.io/kubernetes/cmd/kube-apiserver ./etcd
  )
}

# kube-controller-manager, built like kube-apiserver above in a sibling generated module (its own
# cached tool directory, so a machine that has kube-apiserver does not rebuild it). It needs more
# staging modules than kube-apiserver, and the Go module proxy refuses some of them at the exact
# patch version (k8s.io/kube-controller-manager and k8s.io/endpointslice v0.31.14: "403 This module
# version is not available"): each refused one is replaced by the newest earlier patch the proxy
# serves (v0.31.13 there). Modules the build never loads (the sample-* ones) are not asked for.
go_tools_build_kube_controller_manager() { # out-dir
  kcm_mod="$1/module"
  mkdir -p "$kcm_mod" || return 1
  kube_gomod=$(go_tools_kube_gomod) || return 1
  kcm_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kube_gomod")
  kcm_minor=${KEYROLL_KUBE_VERSION#v1.}
  kcm_patch=${kcm_minor#*.}
  kcm_minor=${kcm_minor%%.*}
  {
    echo "// Generated by scripts/lib/go-tools.sh: builds kube-controller-manager $KEYROLL_KUBE_VERSION."
    echo "module keyroll.test/kube-controller-manager"
    echo
    echo "go $kcm_go"
    echo
    echo "require k8s.io/kubernetes $KEYROLL_KUBE_VERSION"
    echo
    echo "replace ("
    for kcm_staged in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' "$kube_gomod"); do
      case "$kcm_staged" in k8s.io/sample-*) continue ;; esac
      kcm_try=$kcm_patch
      kcm_version=""
      while [ "$kcm_try" -ge 0 ] && [ "$kcm_try" -ge $((kcm_patch - 3)) ]; do
        if go mod download "$kcm_staged@v0.$kcm_minor.$kcm_try" >/dev/null 2>&1; then
          kcm_version="v0.$kcm_minor.$kcm_try"
          break
        fi
        kcm_try=$((kcm_try - 1))
      done
      if [ -z "$kcm_version" ]; then
        # Not served at any recent patch: left at the exact one, which only matters if the build loads it.
        kcm_version="v0.$kcm_minor.$kcm_patch"
      elif [ "$kcm_try" -ne "$kcm_patch" ]; then
        go_tools_say "the proxy refuses $kcm_staged@v0.$kcm_minor.$kcm_patch; using $kcm_version"
      fi
      echo "	$kcm_staged => $kcm_staged $kcm_version"
    done
    echo ")"
  } >"$kcm_mod/go.mod"
  (
    cd "$kcm_mod" &&
      go get "k8s.io/kubernetes/cmd/kube-controller-manager@$KEYROLL_KUBE_VERSION" &&
      CGO_ENABLED=0 go build -trimpath -o "$1/" \
        -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KEYROLL_KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kcm_minor -X k8s.io/component-base/version.gitTreeState=clean" \
        k8s.io/kubernetes/cmd/kube-controller-manager
  )
}

# go_tools_eso_module VERSION: prints the directory of external-secrets' module at VERSION in the
# Go module cache (read-only), downloading it from the proxy when missing.
go_tools_eso_module() {
  eso_module=$(go mod download -json "github.com/external-secrets/external-secrets@$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -f "$eso_module/deploy/crds/bundle.yaml" ] || { go_tools_say "the Go module proxy has no github.com/external-secrets/external-secrets@$1 with deploy/crds/bundle.yaml"; return 1; }
  echo "$eso_module"
}

# external-secrets cannot be built with `go install …@VERSION` either: its go.mod replaces a
# dependency (github.com/Masterminds/sprig/v3 with its own fork), and the checksum database
# lacks some of its dependencies, which only its own go.sum vouches for. So the release's module,
# downloaded from the proxy (and checked against the checksum database like any module), is copied
# to a writable directory and built there as the main module: its go.mod, go.sum and replace apply
# exactly as in the release's own build. Its CRD bundle is kept beside the binary.
go_tools_eso_version=""
go_tools_build_external_secrets() { # out-dir
  eso_module=$(go_tools_eso_module "$go_tools_eso_version") || return 1
  cp -R "$eso_module" "$1/src" && chmod -R u+w "$1/src" || return 1
  cp "$eso_module/deploy/crds/bundle.yaml" "$1/crds.yaml" || return 1
  (
    cd "$1/src" &&
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/external-secrets" .
  ) || return 1
  # The sources are the module cache's; only the binary and the bundle are kept.
  rm -rf "$1/src"
}

# Reloader, built like external-secrets: its module copied from the proxy and built as the main
# module (its go.mod and go.sum vouch for every dependency). Its own module is fetched without the
# checksum database, which lacks it, and refused unless its hash is the pinned one.
go_tools_build_reloader() { # out-dir
  reloader_json=$(GONOSUMDB=github.com/stakater/Reloader go mod download -json "github.com/stakater/Reloader@$KEYROLL_RELOADER_VERSION") || return 1
  reloader_sum=$(echo "$reloader_json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')
  [ "$reloader_sum" = "$KEYROLL_RELOADER_SUM" ] || { go_tools_say "github.com/stakater/Reloader@$KEYROLL_RELOADER_VERSION has hash '$reloader_sum', not the pinned $KEYROLL_RELOADER_SUM"; return 1; }
  reloader_module=$(echo "$reloader_json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  cp -R "$reloader_module" "$1/src" && chmod -R u+w "$1/src" || return 1
  # The proxy refuses the github.com/openshift/api pseudo-version v1.4.19 requires ("403 This
  # module version is not available"); the one its own github.com/openshift/client-go requires is
  # served, and Reloader builds with it (-mod=mod writes its go.sum lines, checked against the
  # checksum database).
  (
    cd "$1/src" &&
      go mod edit -replace "github.com/openshift/api=github.com/openshift/api@$KEYROLL_RELOADER_OPENSHIFT_API" &&
      CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$1/reloader" .
  ) || return 1
  rm -rf "$1/src"
}

go_tools_build_promtool() { # out-dir
  CGO_ENABLED=0 GOBIN="$1" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$KEYROLL_PROMTOOL_VERSION"
}

# Prints the directory holding kube-apiserver and etcd, building them when missing.
keyroll_kube_servers() {
  keyroll_go_tool "kube-$KEYROLL_KUBE_VERSION" go_tools_build_kube "kube-apiserver etcd"
}

# Prints the directory holding kube-controller-manager, building it when missing.
keyroll_kube_controller_manager_dir() {
  keyroll_go_tool "kube-controller-manager-$KEYROLL_KUBE_VERSION" go_tools_build_kube_controller_manager kube-controller-manager
}

# keyroll_external_secrets_dir VERSION: prints the directory holding external-secrets (the
# controller) and crds.yaml (its deploy/crds/bundle.yaml) of that release, building it when missing.
keyroll_external_secrets_dir() {
  go_tools_eso_version=$1
  keyroll_go_tool "external-secrets-$1" go_tools_build_external_secrets external-secrets
}

# Prints the directory holding reloader (Stakater Reloader), building it when missing.
keyroll_reloader_dir() {
  keyroll_go_tool "reloader-$KEYROLL_RELOADER_VERSION" go_tools_build_reloader reloader
}

# Prints the directory holding promtool, building it when missing.
keyroll_promtool_dir() {
  keyroll_go_tool "promtool-$KEYROLL_PROMTOOL_VERSION" go_tools_build_promtool promtool
}
