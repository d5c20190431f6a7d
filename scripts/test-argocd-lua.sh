#!/bin/sh
# Builds test/tools/argocd-lua, the Lua VM Argo CD runs resource health scripts in (gopher-lua,
# opened as Argo CD opens it), once per machine into the cache, through the Go module proxy like
# the tools of scripts/test-kube.sh (scripts/lib/go-tools.sh). test/crd/argocd-health.test.ts runs
# deploy/argocd/health-rotatedkey.lua in it; under CI=true a tool that cannot be built fails it.
# Prints the binary's path on stdout, nothing else; progress goes to stderr. The cache directory
# is named by the gopher-lua version and a hash of the tool's go.mod, go.sum and main.go, so an
# edit to the tool builds a new one and a clone of an older tool keeps its own.
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/go-tools.sh

argocd_lua_src="$PWD/test/tools/argocd-lua"
argocd_lua_gopher=$(sed -n 's|^[[:space:]]*github.com/yuin/gopher-lua \(v[^ ]*\).*|\1|p' "$argocd_lua_src/go.mod")
argocd_lua_hash=$(cat "$argocd_lua_src/go.mod" "$argocd_lua_src/go.sum" "$argocd_lua_src/main.go" | sha256sum | cut -c1-12)

build_argocd_lua() { # out-dir
  # -mod=readonly: the committed go.sum vouches for every module (and the checksum database for
  # it); -buildvcs=false: the source sits in this repository's git tree (or a worktree of it),
  # whose state is not the tool's. Static, without symbol tables, like the other tools.
  (
    cd "$argocd_lua_src" &&
      CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" -o "$1/argocd-lua" .
  ) || return 1
  # The smoke script below, kept beside the binary.
  echo 'return { status = "Healthy" }' >"$1/smoke.lua"
}

dir=$(keyroll_go_tool "argocd-lua-gopher-lua-$argocd_lua_gopher-$argocd_lua_hash" build_argocd_lua argocd-lua)
# A smoke run: the tool answers for an object without a script error.
echo '{}' | "$dir/argocd-lua" "$dir/smoke.lua" >/dev/null || { echo "keyroll: $dir/argocd-lua does not run" >&2; exit 2; }
echo "$dir/argocd-lua"
