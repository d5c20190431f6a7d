#!/bin/sh
# Installs the Go-built tools the integration tests run, once per machine, into the cache
# (scripts/lib/go-tools.sh builds them through the Go module proxy):
#   kube-apiserver + etcd  the real Kubernetes API server (test/support/kube-apiserver.ts);
#   promtool               Prometheus' rule checker, for the alert rules' tests.
# Prints one directory holding all three on stdout, nothing else, so callers can do
# `PATH="$(./scripts/test-kube.sh):$PATH"`. Progress goes to stderr. A cold build takes several
# minutes on two cores; later runs print the directory at once.
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/go-tools.sh

kube=$(keyroll_kube_servers)
promtool=$(keyroll_promtool_dir)
# One directory of links, named by both versions, so a clone pinned to other versions gets its own.
bin="$KEYROLL_CACHE/tools/test-bin-kube-$KEYROLL_KUBE_VERSION-promtool-$KEYROLL_PROMTOOL_VERSION"
if [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/etcd" ] || [ ! -x "$bin/promtool" ]; then
  mkdir -p "$bin"
  ln -sf "$kube/kube-apiserver" "$kube/etcd" "$promtool/promtool" "$bin/"
fi
"$bin/kube-apiserver" --version >/dev/null 2>&1 || { echo "keyroll: $bin/kube-apiserver does not run" >&2; exit 2; }
"$bin/etcd" --version >/dev/null 2>&1 || { echo "keyroll: $bin/etcd does not run" >&2; exit 2; }
"$bin/promtool" --version >/dev/null 2>&1 || { echo "keyroll: $bin/promtool does not run" >&2; exit 2; }
echo "$bin"
