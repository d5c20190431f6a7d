#!/bin/sh
# Draws docs/images/dashboard.png from a real run (bench/dashboard-picture.ts): builds the
# Prometheus server once with go install (same version as promtool, into the tool cache) and
# needs Debian's chromium (apt-get install chromium). Not part of CI: run it after changing the
# dashboard, and commit the picture.  Usage: sh bench/dashboard-picture.sh [--minutes 8]
set -eu
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/chart-tools.sh
. scripts/lib/node.sh
dir="$KEYROLL_CACHE/tools/prometheus-$KEYROLL_PROMTOOL_VERSION"
if [ ! -x "$dir/prometheus" ]; then
  echo "dashboard-picture: building prometheus $KEYROLL_PROMTOOL_VERSION into $dir (minutes, once)" >&2
  mkdir -p "$dir"
  CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/prometheus@$KEYROLL_PROMTOOL_VERSION"
fi
PROMETHEUS="$dir/prometheus" node bench/dashboard-picture.ts "$@"
