// `keyroll plan` (a dry run that changes nothing) and `keyroll status` (what happened, per key),
// as child processes against the emulator and a file backend.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEMO_KEYS,
  ORG,
  TARGETS,
  eventsNamed,
  openFileBackend,
  snapshotTree,
  useCliFixture,
} from './harness.ts';

const cli = useCliFixture();
const DAY_MS = 24 * 60 * 60_000;

interface PlannedKey {
  keyId: string;
  due: boolean | null;
  reasons: string[];
  nextRunAt: string | null;
  lastRotatedAt: string | null;
  writes: string[];
}

interface StatusKey {
  keyId: string;
  lastRotatedAt: string | null;
  lastRotationId: string | null;
  nextDueAt: string | null;
  due: boolean | null;
  overdue: boolean | null;
  lock: { owner: string; expiresAt: string } | null;
  intent: { owner: string; rotationId: string } | null;
  lastFailure: { step: string; errorCode: string } | null;
  error?: { errorCode: string };
}

/** The default schedule of the test policy: Mondays 03:00 UTC. */
function isMondayThreeUtc(iso: string | null): boolean {
  if (iso === null) return false;
  const date = new Date(iso);
  return date.getUTCDay() === 1 && date.getUTCHours() === 3 && date.getUTCMinutes() === 0;
}

describe('keyroll plan', () => {
  it('reports why each key is due and the next scheduled run, and changes nothing: no roll, no file touched', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    // Behind the CLI's back: billing was last rotated 10 days ago (past its 7d maxAge and a
    // Monday run); search has an intent marker left by a runner that died mid-rotation.
    const backend = await openFileBackend(cli.secretsDir);
    await backend.recordRotation(TARGETS.key_demo_billing, {
      rotationId: 'old-rotation',
      rotatedAt: new Date(Date.now() - 10 * DAY_MS).toISOString(),
      version: '1',
    });
    await backend.setIntent(TARGETS.key_demo_search, {
      rotationId: 'died-mid-way',
      keyId: 'key_demo_search',
      owner: 'gone-host/1/dead',
      startedAt: new Date().toISOString(),
    });
    const rollsBefore = cli.emulator.state.totalRolls();
    const filesBefore = await snapshotTree(cli.dir);

    const json = await cli.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    const text = await cli.run(['plan', '-p', 'policy.yaml']);

    expect(json.code).toBe(0);
    expect(text.code).toBe(0);
    expect(cli.emulator.state.totalRolls() - rollsBefore).toBe(0);
    expect(await snapshotTree(cli.dir)).toEqual(filesBefore);
    const plan = (JSON.parse(json.stdout) as { keys: PlannedKey[] }).keys;
    const byId = new Map(plan.map((p) => [p.keyId, p]));
    expect(byId.get('key_demo_billing')).toMatchObject({ due: true, writes: ['files:billing.json (json)'] });
    expect(byId.get('key_demo_billing')?.reasons).toEqual(expect.arrayContaining(['schedule', 'max-age']));
    expect(isMondayThreeUtc(byId.get('key_demo_billing')?.nextRunAt ?? null)).toBe(true);
    expect(byId.get('key_demo_search')).toMatchObject({
      due: true,
      reasons: ['intent'],
      writes: ['files:search.key (raw)'],
    });
    expect(byId.get('key_demo_ingest')).toMatchObject({
      due: false,
      reasons: [],
      nextRunAt: null,
      writes: ['files:ingest.json (json)'],
    });
    expect(text.lastLine).toBe('2 of 3 keys due; nothing was changed');
    // What an emergency over the selected keys costs in time, and what bounds it (file backend: the API).
    expect(text.stdout).toContain(
      'an emergency over these 3 keys (rotate --reason leak) takes at least 0.1s, bound by the API rate',
    );
    expect(
      (JSON.parse(json.stdout) as { emergency: { keys: number; boundBy: { budget: string } } }).emergency,
    ).toMatchObject({ keys: 3, boundBy: { budget: 'api' } });
    expect(text.stdout).toMatch(
      /^key_demo_billing\s+org_demo_acme\s+yes\s+schedule, max-age\s+\S+\s+files:billing\.json \(json\)$/m,
    );
    expect(text.stdout).toMatch(/^key_demo_search\s+org_demo_acme\s+yes\s+intent\s/m);
  });

  it('on a fresh policy, reports every key as never rotated without contacting the API or writing a file', async () => {
    await cli.writePolicy();
    const result = await cli.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect(result.code).toBe(0);
    const plan = (JSON.parse(result.stdout) as { keys: PlannedKey[] }).keys;
    expect(plan.map((p) => [p.keyId, p.due, p.reasons])).toEqual(
      DEMO_KEYS.map((id) => [id, true, ['never-rotated']]),
    );
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(cli.emulator.state.callCount('listProjects')).toBe(0);
    expect(Object.keys(await snapshotTree(cli.secretsDir))).toEqual([]);
  });
});

describe('keyroll status', () => {
  it('-o json matches what run did: rotation ids from the audit trail, rotation times from the stored values', async () => {
    await cli.writePolicy();
    const run = await cli.run(['run', '-p', 'policy.yaml']);
    expect(run.code).toBe(0);
    const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(status.code).toBe(0);
    const keys = (JSON.parse(status.stdout) as { keys: StatusKey[] }).keys;
    expect(keys.map((k) => k.keyId)).toEqual([...DEMO_KEYS]);
    for (const key of keys) {
      const succeeded = eventsNamed(run, 'key.succeeded').find((e) => e.keyId === key.keyId);
      expect(key.lastRotationId).toBe(succeeded?.rotationId);
      // rotatedAt is taken when the roll answers: after the intent was set, before key.rolled was written.
      const intentSet = eventsNamed(run, 'key.intent.set').find((e) => e.keyId === key.keyId);
      const rolled = eventsNamed(run, 'key.rolled').find((e) => e.keyId === key.keyId);
      expect(Date.parse(key.lastRotatedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(intentSet?.time ?? ''));
      expect(Date.parse(key.lastRotatedAt ?? '')).toBeLessThanOrEqual(Date.parse(rolled?.time ?? ''));
      expect(key).toMatchObject({ due: false, overdue: false, lock: null, intent: null, lastFailure: null });
    }
    for (const id of ['key_demo_billing', 'key_demo_ingest'] as const) {
      const stored = JSON.parse(await readFile(join(cli.secretsDir, TARGETS[id].path), 'utf8')) as {
        rotatedAt: string;
      };
      expect(keys.find((k) => k.keyId === id)?.lastRotatedAt).toBe(stored.rotatedAt);
    }
    // Scheduled keys are next due at the next Monday 03:00; ingest (maxAge only) 30 days after its rotation.
    expect(isMondayThreeUtc(keys[1]?.nextDueAt ?? null)).toBe(true);
    const ingest = keys[2];
    expect(Date.parse(ingest?.nextDueAt ?? '')).toBe(Date.parse(ingest?.lastRotatedAt ?? '') + 30 * DAY_MS);
  });

  it('the table shows the lock holder, a leftover intent and the last error', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    await backend.acquireLock(TARGETS.key_demo_billing, {
      owner: 'other-host/4242/abcd',
      rotationId: 'r-lock',
      ttlMs: 15 * 60_000,
    });
    await backend.setIntent(TARGETS.key_demo_search, {
      rotationId: 'r-dead',
      keyId: 'key_demo_search',
      owner: 'gone-host/1/dead',
      startedAt: '2026-01-05T03:00:01.000Z',
    });
    await backend.recordFailure(TARGETS.key_demo_ingest, {
      rotationId: 'r-fail',
      step: 'roll',
      errorCode: 'KR_API_FORBIDDEN',
      at: '2026-01-05T03:00:02.000Z',
    });
    const result = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);
    expect(result.code).toBe(0);
    expect(result.stdout.split('\n')[0]).toMatch(
      /^KEY\s+ORG\s+LAST ROTATED\s+NEXT DUE\s+OVERDUE\s+LOCK\s+INTENT\s+LAST ERROR$/,
    );
    expect(result.stdout).toMatch(/^key_demo_billing\s.*other-host\/4242\/abcd until \S+/m);
    expect(result.stdout).toMatch(
      /^key_demo_search\s.*left by gone-host\/1\/dead at 2026-01-05T03:00:01\.000Z/m,
    );
    expect(result.stdout).toMatch(/^key_demo_ingest\s.*roll KR_API_FORBIDDEN at 2026-01-05T03:00:02\.000Z$/m);
  });

  it('shows a quarantine only with a time it can show, and names a forged one on stderr without its value', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    const failure = {
      rotationId: 'r-fail',
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
      at: '2026-01-05T03:00:02.000Z',
      consecutive: 6,
      firstAt: '2026-01-01T03:00:00.000Z',
    };
    await backend.recordFailure(TARGETS.key_demo_billing, {
      ...failure,
      quarantinedAt: '2026-01-05T03:00:02.000Z',
    });
    await backend.recordFailure(TARGETS.key_demo_search, { ...failure, quarantinedAt: 'x-forged' });
    const result = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(result.code).toBe(0);
    const keys = (
      JSON.parse(result.stdout) as {
        keys: (StatusKey & {
          failureStreak: { quarantinedAt: string | null } | null;
          distrusted: unknown[];
        })[];
      }
    ).keys;
    expect(keys[0]).toMatchObject({
      failureStreak: { quarantinedAt: '2026-01-05T03:00:02.000Z' },
      distrusted: [],
    });
    expect(keys[1]).toMatchObject({
      failureStreak: { quarantinedAt: null },
      distrusted: [
        { record: 'lastFailure', field: 'quarantinedAt', problem: 'malformed', action: 'ignored' },
      ],
    });
    expect(result.stderr).toContain(
      'keyroll: key_demo_search: keyroll does not trust part of its bookkeeping: lastFailure.quarantinedAt malformed, ignored.',
    );
    expect(result.stderr).not.toContain('x-forged');
  });

  it('exits 1 and says which key cannot be read when a destination is unreadable', async () => {
    await cli.writeFile('not-a-directory', 'a file where the backend expects a directory\n');
    await cli.writePolicy({
      extraBackends: '  broken: { kind: file, directory: ./not-a-directory/secrets }\n',
      extraKeys: `  - id: key_demo_legacy\n    organization: ${ORG}\n    destinations: [{ backend: broken, path: legacy.json }]\n`,
    });
    const result = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(result.code).toBe(1);
    const keys = (JSON.parse(result.stdout) as { keys: StatusKey[] }).keys;
    expect(keys.find((k) => k.keyId === 'key_demo_legacy')?.error?.errorCode).toMatch(/^KR_BACKEND_/);
    expect(keys.filter((k) => k.error === undefined).map((k) => k.keyId)).toEqual([...DEMO_KEYS]);
  });
});
