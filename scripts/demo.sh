#!/bin/sh
# The README's first command: installs what it needs (Node 24 when the machine's node is older,
# the production npm dependencies only), then runs `keyroll demo` (the emulator and the file
# backend, in-process; no credentials). ./scripts/test.sh later adds the dev dependencies.
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/node.sh
keyroll_npm_ci production
exec node src/cli/entry.ts demo "$@"
