# Least-privilege Vault / OpenBao policy for keyroll (config/vault-policy.yaml).
#
# keyroll writes each destination of the policy on the KV v2 engine mounted at `secret/`:
# - secret/data/<path>            the secret itself (check-and-set writes, read-back);
# - secret/data/<path>.keyroll-lock  the key lock (a sibling entry, created once, then updated);
# - secret/metadata/<path>        custom_metadata: intent marker, last rotation, last failure.
# It never lists, deletes or destroys. Narrow the globs to your destination paths; the
# `apps/` prefix below matches the example policy. Preflight asks sys/capabilities-self for
# exactly these capabilities and refuses to roll when one is missing (invariant 1).
#
#   bao policy write keyroll config/vault-policy.hcl
#   bao write auth/kubernetes/role/keyroll bound_service_account_names=keyroll \
#     bound_service_account_namespaces=keyroll token_policies=keyroll token_ttl=15m

path "secret/data/apps/*" {
  capabilities = ["create", "read", "update"]
}

path "secret/metadata/apps/*" {
  capabilities = ["create", "read", "update"]
}

# Preflight: which of the above does this token actually hold?
path "sys/capabilities-self" {
  capabilities = ["update"]
}

# Token bookkeeping (also in Vault's built-in `default` policy; listed for tokens created without it).
path "auth/token/lookup-self" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}
