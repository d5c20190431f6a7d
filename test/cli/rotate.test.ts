// `keyroll rotate`: on-demand rotation (leak response), as a child process against the emulator
// and a file backend.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { DEMO_KEYS, eventsNamed, storedSecret, useCliFixture } from './harness.ts';

const cli = useCliFixture();

/** A fourth key, of another organization (the seed's owner principal owns both). */
const SHOP_KEY = `  - id: key_demo_shop
    organization: org_demo_starter
    destinations: [{ backend: files, path: shop.json }]
`;

async function rotateEverythingOnce(): Promise<void> {
  const first = await cli.run(['run', '-p', 'policy.yaml']);
  expect(first.code).toBe(0);
}

describe('keyroll rotate', () => {
  it('--reason leak bypasses the minimum interval, keeps the order given, and records actor, reason and ticket on every event', async () => {
    await cli.writePolicy();
    await rotateEverythingOnce();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_search',
      '--key',
      'key_demo_billing',
      '--reason',
      'leak',
      '--actor',
      'alice',
      '--ticket',
      'INC-4711',
      '--concurrency',
      '1',
    ]);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 2, failed 0, skipped 0');
    expect(cli.emulator.state.rollCount('key_demo_search')).toBe(2);
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(2);
    expect(cli.emulator.state.rollCount('key_demo_ingest')).toBe(1);
    for (const id of ['key_demo_search', 'key_demo_billing'] as const) {
      expect(cli.emulator.state.isLiveSecret(id, await storedSecret(cli.secretsDir, id))).toBe(true);
    }
    // The responder lists the leaked key first; it is rotated (and reported) first.
    expect(eventsNamed(result, 'key.succeeded').map((e) => e.keyId)).toEqual([
      'key_demo_search',
      'key_demo_billing',
    ]);
    expect(eventsNamed(result, 'run.started')[0]).toMatchObject({ command: 'rotate', keys: 2, force: true });
    const trail = result.events.filter((e) => e.event.startsWith('key.') || e.event.startsWith('run.'));
    expect(trail.length).toBeGreaterThan(10);
    for (const event of trail) {
      expect({ event: event.event, actor: event.actor, reason: event.reason, ticket: event.ticket }).toEqual({
        event: event.event,
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-4711',
      });
    }
  });

  it('without leak, compromise or --force, a key inside its minimum interval is skipped and not rolled', async () => {
    await cli.writePolicy();
    await rotateEverythingOnce();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'manual',
      '--actor',
      'bob',
    ]);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 0, failed 0, skipped 1');
    expect(eventsNamed(result, 'key.skipped')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        why: 'min-interval',
        actor: 'bob',
        reason: 'manual',
      }),
    ]);
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(1);
  });

  it('--force bypasses the minimum interval for a plan-change rotation', async () => {
    await cli.writePolicy();
    await rotateEverythingOnce();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_ingest',
      '--reason',
      'plan-change',
      '--force',
      '--actor',
      'bob',
    ]);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 1, failed 0, skipped 0');
    expect(cli.emulator.state.rollCount('key_demo_ingest')).toBe(2);
  });

  it('--org rotates every key of that organization and no other; the actor defaults to KEYROLL_ACTOR', async () => {
    await cli.writePolicy({ extraKeys: SHOP_KEY });
    const result = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--org', 'org_demo_starter', '--reason', 'compromise'],
      { env: { KEYROLL_ACTOR: 'oncall-bot' } },
    );
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 1, failed 0, skipped 0');
    expect(cli.emulator.state.rollCount('key_demo_shop')).toBe(1);
    expect(cli.emulator.state.totalRolls()).toBe(1);
    expect(eventsNamed(result, 'key.succeeded')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_shop',
        organizationId: 'org_demo_starter',
        actor: 'oncall-bot',
        reason: 'compromise',
      }),
    ]);
  });

  it('--all rotates every key of the policy, one organization after the other, and -o json reports each key', async () => {
    // The starter key sits between two acme keys in the policy.
    const path = await cli.writePolicy({ extraKeys: SHOP_KEY });
    const text = await readFile(path, 'utf8');
    const interleaved = text
      .replace(SHOP_KEY, '')
      .replace('  - id: key_demo_search\n', `${SHOP_KEY}  - id: key_demo_search\n`);
    expect(interleaved.indexOf('key_demo_shop')).toBeLessThan(interleaved.indexOf('key_demo_search'));
    await cli.writeFile('policy.yaml', interleaved);
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--all',
      '--reason',
      'leak',
      '--actor',
      'alice',
      '--concurrency',
      '1',
      '-o',
      'json',
    ]);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 4, failed 0, skipped 0');
    for (const id of [...DEMO_KEYS, 'key_demo_shop']) expect(cli.emulator.state.rollCount(id)).toBe(1);
    const report = JSON.parse(result.stdout.trimEnd().split('\n').at(-2) ?? '') as {
      exitCode: number;
      keys: { keyId: string; result: string; rotationId: string }[];
    };
    expect(report.exitCode).toBe(0);
    expect(report.keys.map((k) => [k.keyId, k.result])).toEqual([
      ...DEMO_KEYS.map((id) => [id, 'rotated']),
      ['key_demo_shop', 'rotated'],
    ]);
    expect(eventsNamed(result, 'key.succeeded').map((e) => e.keyId)).toEqual([...DEMO_KEYS, 'key_demo_shop']);
    // The report's rotation ids are the ones the audit trail used.
    const audited = new Map(eventsNamed(result, 'key.succeeded').map((e) => [e.keyId, e.rotationId]));
    for (const key of report.keys) expect(audited.get(key.keyId)).toBe(key.rotationId);
  });

  it('an unknown key exits 2, names it and the policy file, and rotates nothing (not even the known key)', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--key',
      'key_demo_nope',
      '--reason',
      'leak',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('policy.yaml: no key "key_demo_nope" in the policy');
    expect(result.events).toEqual([]);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  it('an organization without keys in the policy exits 2 and names it', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--org',
      'org_demo_nowhere',
      '--reason',
      'leak',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('org_demo_nowhere');
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
