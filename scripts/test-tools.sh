#!/bin/sh
# Installs the command-line tools the unit tests shell out to, when they are missing, and prints
# the path of each on stdout (one `name=path` line per tool; messages go to stderr).
#   age: the escrow test decrypts keyroll's sealed escrow files with the real `age` CLI, because
#        "an operator can open it with stock age" is the property that matters, not a round trip
#        through the same library that encrypted it.
# Order: already on PATH → cached copy → `apt-get install age` (Debian/Ubuntu, as root) →
# `go install filippo.io/age/cmd/...@v1.2.1` into the cache (KEYROLL_CACHE/tools/bin).
# Exit status is non-zero when a tool could not be installed; the tests decide whether that fails
# (CI=true) or skips.
set -u
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"
TOOLS_BIN="$KEYROLL_CACHE/tools/bin"
AGE_GO_VERSION="${KEYROLL_AGE_GO_VERSION:-v1.2.1}"

say() { echo "keyroll test-tools: $*" >&2; }

install_age_apt() {
  command -v apt-get >/dev/null 2>&1 || return 1
  [ "$(id -u)" -eq 0 ] || { say "not root; skipping apt-get install age"; return 1; }
  # Serialized: several test workers (or engineers) may run this at once, and apt holds a lock.
  (
    flock 9 2>/dev/null || true
    command -v age >/dev/null 2>&1 && exit 0
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q age >/dev/null 2>&1; then
      say "apt-get install age failed; running apt-get update and trying again"
      apt-get update -q >/dev/null 2>&1 || exit 1
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q age >/dev/null 2>&1 || exit 1
    fi
  ) 9>/tmp/keyroll-apt.lock
  command -v age >/dev/null 2>&1
}

install_age_go() {
  command -v go >/dev/null 2>&1 || { say "no go toolchain for the fallback install"; return 1; }
  mkdir -p "$TOOLS_BIN"
  say "installing age $AGE_GO_VERSION with go install into $TOOLS_BIN"
  GOBIN="$TOOLS_BIN" go install "filippo.io/age/cmd/...@$AGE_GO_VERSION" >&2 || return 1
  [ -x "$TOOLS_BIN/age" ]
}

find_age() {
  if command -v age >/dev/null 2>&1; then command -v age; return 0; fi
  if [ -x "$TOOLS_BIN/age" ]; then echo "$TOOLS_BIN/age"; return 0; fi
  return 1
}

age_path=$(find_age) || {
  say "age CLI not found; installing it"
  if install_age_apt || install_age_go; then
    age_path=$(find_age)
  else
    say "could not install age: run 'apt-get install age' (Debian/Ubuntu) or 'go install filippo.io/age/cmd/...@$AGE_GO_VERSION'"
    exit 1
  fi
}
echo "age=$age_path"
