#!/bin/sh
# Draws docs/images/dashboard.png from a real run (bench/dashboard-picture.ts): builds the
# Prometheus server once with go install (same version as promtool, into the tool cache) and
# needs Debian's chromium (apt-get install chromium). Not part of CI: run it after changing the
# dashboard, and commit the picture.  Usage: sh bench/dashboard-picture.sh [--minutes 8]
set -eu
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/go-tools.sh
. scripts/lib/node.sh
build_prometheus() { # out-dir
  CGO_ENABLED=0 GOBIN="$1" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/prometheus@$KEYROLL_PROMTOOL_VERSION"
}
prometheus=$(keyroll_go_tool "prometheus-$KEYROLL_PROMTOOL_VERSION" build_prometheus prometheus)
PROMETHEUS="$prometheus/prometheus" node bench/dashboard-picture.ts "$@"
