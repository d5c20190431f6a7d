// `keyroll validate <dir>`: a directory of keyroll.io objects checked with the kinds' zod schemas
// (the ones the CRDs are generated from), offline, each problem with file:line, object and field.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './harness.ts';

const cli = useCliFixture();

const STORE = `apiVersion: keyroll.io/v1alpha1
kind: KeyStore
metadata:
  name: aws
  namespace: billing
spec:
  kind: aws
  region: eu-west-1
---
apiVersion: v1
kind: Namespace
metadata:
  name: billing
`;

const KEY = `apiVersion: keyroll.io/v1alpha1
kind: RotatedKey
metadata:
  name: billing-api
  namespace: billing
spec:
  id: key_billing
  organization: org_billing
  apiRef: { name: acme }
  destinations:
    - storeRef: { kind: KeyStore, name: aws }
      path: billing/api-key
  maxAge: 30d
`;

describe('keyroll validate <dir>', () => {
  it('exits 0 for a directory of valid objects, counting them by kind and skipping other groups', async () => {
    await mkdir(join(cli.dir, 'keys'));
    await cli.writeFile('keys/store.yaml', STORE);
    await cli.writeFile('keys/key.yaml', KEY);
    const result = await cli.run(['validate', 'keys']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('ok    objects keys — 1 RotatedKey, 1 KeyStore\n');
  });

  it('exits 2 naming file:line, the object and the field of each problem', async () => {
    await mkdir(join(cli.dir, 'keys'));
    await cli.writeFile('keys/store.yaml', STORE.replace('  region: eu-west-1', '  regio: eu-west-1'));
    const key = `${KEY.replace('  maxAge: 30d\n', '  slots: [key_a, key_b]\n  maxAge: 30d\n')}  consumers:\n    - { kind: deployment, name: payments, namespace: other-team }\n`;
    await cli.writeFile('keys/key.yaml', key);
    const result = await cli.run(['validate', 'keys']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toEqual([
      'keys/key.yaml:16 RotatedKey billing/billing-api spec.consumers[0]: Unrecognized key: "namespace"',
      'keys/key.yaml:6 RotatedKey billing/billing-api spec.consumerRefresh: consumerRefresh is required with slots: the longest time a consumer may keep using a value it read',
      'keys/store.yaml:6 KeyStore billing/aws spec: Unrecognized key: "regio"',
    ]);
  });
});
