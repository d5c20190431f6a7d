// `keyroll demo` rotates the demo policy's slot entry beside the single keys (issue 15 §6): the
// slot entry's id names no API key, so the demo shows both of its slots, and the one rolled is
// the one the stored value names while the other (the value consumers hold) still works.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawnCli } from './harness.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'keyroll-demo-slots-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('keyroll demo', () => {
  it('rotates the slot entry billing-api: the rolled slot is stored as active, the other slot still works', async () => {
    const result = await spawnCli(['demo', '--dir', 'demo'], root).result;
    expect(result.code, result.stderr).toBe(0);
    expect(result.lastLine).toBe('rotated 4, failed 0, skipped 0');

    const stored = JSON.parse(await readFile(join(root, 'demo', 'secrets', 'billing-api.json'), 'utf8')) as { apiKey: string; keyId: string; organizationId: string };
    expect(['key_demo_billing_a', 'key_demo_billing_b']).toContain(stored.keyId);
    expect(stored.organizationId).toBe('org_demo_acme');
    const other = stored.keyId === 'key_demo_billing_a' ? 'key_demo_billing_b' : 'key_demo_billing_a';

    const line = result.stdout.split('\n').find((text) => text.trimStart().startsWith('billing-api '));
    expect(line).toContain('stored=files:billing-api.json');
    expect(line).toContain(`${stored.keyId} rejected (401)`);
    expect(line).toContain(`${other} still works`);
    expect(result.stdout).not.toContain(stored.apiKey);
  });
});
