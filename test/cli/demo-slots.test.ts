// `keyroll demo` rotates the demo policy's slot entry beside the single keys (issue 15 §6): the
// slot entry's id names no API key, so the demo shows both of its slots, and the one rolled is
// the one the stored value names while the other (the value consumers hold) still works.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../support/temp-dir.ts';
import { spawnCli } from './harness.ts';

const root = useTempDir('keyroll-demo-slots-');

describe('keyroll demo', () => {
  it('rotates the slot entry billing-api: the rolled slot is stored as active, the other slot still works', async () => {
    const result = await spawnCli(['demo', '--dir', 'demo'], root.path()).result;
    expect(result.code, result.stderr).toBe(0);
    expect(result.lastLine).toBe('rotated 4, failed 0, skipped 0');

    const stored = JSON.parse(
      await readFile(join(root.path(), 'demo', 'secrets', 'billing-api.json'), 'utf8'),
    ) as { apiKey: string; keyId: string; organizationId: string };
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
