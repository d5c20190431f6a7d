#!/bin/sh
# Prepares this machine for the benchmarks, once; quick when everything is already there:
#   - Debian's awscli (/usr/bin/aws), for the shell loop's `aws secretsmanager put-secret-value`;
#   - OpenBao (`bao`) and moto from the cached venv of scripts/test-servers.sh;
#   - kube-apiserver and etcd (scripts/test-kube.sh), for the leak benchmark's Kubernetes consumers;
#   - kube-controller-manager and external-secrets (scripts/test-controllers.sh), for leak-real;
#   - the compiled dist/ (`npm run build`): cold start is measured on `node dist/cli/entry.js`,
#     as the Docker image runs it.
# Prints the venv's bin directory on stdout, nothing else; progress goes to stderr.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ ! -x /usr/bin/aws ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "keyroll bench: installing Debian's awscli" >&2
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends awscli >&2
  else
    echo "keyroll bench: /usr/bin/aws is missing; install it with: sudo apt-get install -y awscli" >&2
    exit 2
  fi
fi
command -v curl >/dev/null || { echo "keyroll bench: curl is missing (apt-get install -y curl)" >&2; exit 2; }
command -v jq >/dev/null || { echo "keyroll bench: jq is missing (apt-get install -y jq)" >&2; exit 2; }

bin=$(sh scripts/test-servers.sh)
# kube-apiserver and etcd for the leak benchmark's Kubernetes consumers (cached once built).
sh scripts/test-kube.sh >/dev/null
# kube-controller-manager and external-secrets for leak-real (cached once built; minutes when cold).
sh scripts/test-controllers.sh >/dev/null
echo "keyroll bench: building dist/" >&2
npm run --silent build >&2
echo "$bin"
