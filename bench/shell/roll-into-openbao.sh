#!/bin/sh
# The loop a user would write instead of keyroll (bench/shell-loop.ts times it): roll each key
# with curl, store the answer in OpenBao with `bao kv put`. No lock, no intent marker, no
# verification, no retry; the secret passes through argv, where `ps` shows it.
# Environment: KEYS (space-separated ids), API_URL, API_TOKEN, ORG, BAO_ADDR, BAO_TOKEN.
set -eu
for key in $KEYS; do
  secret=$(curl -fsS -X POST -H "Authorization: Bearer $API_TOKEN" "$API_URL/v1/auth/keys/$key/roll?organizationId=$ORG" | jq -r .data.key)
  bao kv put -mount=secret "bench/shell/$key" apiKey="$secret" >/dev/null
done
