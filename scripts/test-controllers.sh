#!/bin/sh
# Installs the real controllers the consumer integration tests run against, once per machine,
# into the cache (scripts/lib/go-tools.sh builds them through the Go module proxy):
#   kube-controller-manager  the deployment, replicaset, statefulset and daemonset controllers,
#                            at the kube-apiserver's version (KEYROLL_KUBE_VERSION);
#   external-secrets         each release of KEYROLL_ESO_VERSIONS, its controller and CRD bundle;
#   a CRD bundle alone       of KEYROLL_ESO_CRDS_ONLY (a release serving only v1beta1);
#   reloader                 Stakater Reloader KEYROLL_RELOADER_VERSION.
# Prints one directory on stdout, nothing else, holding:
#   kube-controller-manager
#   external-secrets-VERSION/{external-secrets,crds.yaml}   one per built release
#   external-secrets-crds-VERSION.yaml                      the CRD-only release's bundle
#   reloader
# test/support/kube-controllers.ts reads it. Progress goes to stderr. A cold build takes about 7 min
# (kube-controller-manager), 3-4 min per external-secrets release and about 5 min of CPU (15 min
# on a busy two-core machine) for Reloader; later runs
# print the directory at once.
set -e
cd "$(dirname "$(readlink -f "$0")")/.."
. scripts/lib/go-tools.sh

kcm=$(keyroll_kube_controller_manager_dir)
eso_dirs=""
for eso_version in $KEYROLL_ESO_VERSIONS; do
  eso_dirs="$eso_dirs $(keyroll_external_secrets_dir "$eso_version")"
done
crds_only="$(go_tools_eso_module "$KEYROLL_ESO_CRDS_ONLY")/deploy/crds/bundle.yaml"
reloader=$(keyroll_reloader_dir)

# One directory of links, named by every version, so a clone pinned to other versions gets its own.
bin="$KEYROLL_CACHE/tools/test-bin-controllers-kube-$KEYROLL_KUBE_VERSION-eso-$(echo $KEYROLL_ESO_VERSIONS | tr ' ' '-')-crds-$KEYROLL_ESO_CRDS_ONLY-reloader-$KEYROLL_RELOADER_VERSION"
mkdir -p "$bin"
ln -sfn "$kcm/kube-controller-manager" "$bin/kube-controller-manager"
ln -sfn "$reloader/reloader" "$bin/reloader"
for eso_dir in $eso_dirs; do
  ln -sfn "$eso_dir" "$bin/${eso_dir##*/}"
done
# A copy, not a link: the module cache may be cleaned (go clean -modcache) under a link.
[ -s "$bin/external-secrets-crds-$KEYROLL_ESO_CRDS_ONLY.yaml" ] || cp "$crds_only" "$bin/external-secrets-crds-$KEYROLL_ESO_CRDS_ONLY.yaml"

"$bin/kube-controller-manager" --version >/dev/null 2>&1 || { echo "keyroll: $bin/kube-controller-manager does not run" >&2; exit 2; }
# Reloader has no --version, and its --help reaches for a cluster first: present and executable.
[ -x "$bin/reloader" ] || { echo "keyroll: $bin/reloader is not executable" >&2; exit 2; }
for eso_version in $KEYROLL_ESO_VERSIONS; do
  "$bin/external-secrets-$eso_version/external-secrets" --help >/dev/null 2>&1 || { echo "keyroll: $bin/external-secrets-$eso_version/external-secrets does not run" >&2; exit 2; }
done
echo "$bin"
