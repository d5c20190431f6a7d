#!/bin/sh
# The README's first command: installs what it needs, then runs `keyroll demo` (the emulator and
# the file backend, in-process; no credentials).
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/node.sh
keyroll_npm_ci
exec node src/cli/entry.ts demo "$@"
