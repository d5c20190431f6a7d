#!/bin/sh
# The loop a user would write instead of keyroll (bench/shell-loop.ts times it): roll each key
# with curl, store the answer in Secrets Manager (moto here) with Debian's awscli. No lock, no
# intent marker, no verification, no retry; the secret passes through argv, where `ps` shows it.
# Environment: KEYS (space-separated ids), API_URL, API_TOKEN, ORG, AWS_ENDPOINT, AWS_* credentials.
set -eu
for key in $KEYS; do
  secret=$(curl -fsS -X POST -H "Authorization: Bearer $API_TOKEN" "$API_URL/v1/auth/keys/$key/roll?organizationId=$ORG" | jq -r .data.key)
  /usr/bin/aws --endpoint-url "$AWS_ENDPOINT" secretsmanager put-secret-value --secret-id "bench/shell/$key" --secret-string "$secret" >/dev/null
done
