#!/bin/sh
# The whole test suite, as the README gives it: installs what it needs (Node 24 when the
# machine's node is older, npm packages, and, on first use, the OpenBao and moto test servers
# in a cached Python venv, the Go-built kube-apiserver, etcd and promtool of scripts/test-kube.sh,
# the real controllers of scripts/test-controllers.sh and the Argo CD Lua VM of
# scripts/test-argocd-lua.sh, which test/crd/argocd-health.test.ts builds), then typechecks, lints and runs every
# test (unit + integration).
# Extra arguments go to vitest (e.g. ./scripts/test.sh test/api).
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/node.sh
keyroll_npm_ci
npm run --silent typecheck
npm run --silent lint
# Every project (unit, integration, faults); the fault reporter adds the fault table and summary line.
exec npx vitest run --coverage --reporter=default --reporter=./test/faults/reporter.ts "$@"
