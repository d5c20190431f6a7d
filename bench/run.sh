#!/bin/sh
# `npm run bench`: Node 24, the npm dependencies, the tools (bench/setup.sh), then every
# benchmark (bench/run.ts). Arguments go to bench/run.ts: benchmark names, --quick.
set -e
cd "$(dirname "$0")/.."
. scripts/lib/node.sh
keyroll_npm_ci
KEYROLL_BENCH_BIN=$(sh bench/setup.sh)
export KEYROLL_BENCH_BIN
exec node bench/run.ts "$@"
