// `keyroll plan` and `keyroll status` for two-slot entries (which slot is active, when the
// standby may roll) and `status --probe` (does each stored secret still work: drift), as child
// processes against the emulator and a file backend.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StoreTarget } from '../../src/backends/types.ts';
import { ORG, openFileBackend, snapshotTree, useCliFixture, type CliResult } from './harness.ts';

const cli = useCliFixture();
const HOUR_MS = 60 * 60_000;
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const SLOT_ENTRY = `  - id: billing-api
    organization: ${ORG}
    slots: [${SLOT_A}, ${SLOT_B}]
    consumerRefresh: 1h
    destinations: [{ backend: files, path: billing-api.json }]
`;
const SLOT_TARGET: StoreTarget = {
  path: 'billing-api.json',
  shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'organizationId', 'rotatedAt'] },
};

interface SlotsJson {
  ids: string[];
  active: string | null;
  standby: string | null;
  consumerRefreshMs: number | null;
  standbyFreeAt: string | null;
  standbyNextRollAt: string | null;
}

interface Row {
  keyId: string;
  lastRotatedAt: string | null;
  nextDueAt?: string | null;
  nextRunAt?: string | null;
  slots?: SlotsJson;
  lastProbe?: { at: string; result: string } | null;
  probe?: { stored: string; slots?: Record<string, string>; errorCode?: string };
  drift?: boolean;
}

function rows(result: CliResult): Map<string, Row> {
  return new Map((JSON.parse(result.stdout) as { keys: Row[] }).keys.map((row) => [row.keyId, row]));
}

async function storedKeyId(secretsDir: string): Promise<string> {
  return (JSON.parse(await readFile(join(secretsDir, SLOT_TARGET.path), 'utf8')) as { keyId: string }).keyId;
}

async function runSlotPolicy(): Promise<void> {
  await cli.writePolicy({ extraKeys: SLOT_ENTRY });
  const run = await cli.run(['run', '-p', 'policy.yaml']);
  expect(run.code, run.stderr).toBe(0);
}

describe('plan and status for a two-slot entry', () => {
  it('show the slot the rotation stored as active, the other as standby, free one consumerRefresh after the rotation', async () => {
    await runSlotPolicy();
    // The first rotation rolled the standby (slot b: a counts as active before keyroll's first record).
    expect([cli.emulator.state.rollCount(SLOT_A), cli.emulator.state.rollCount(SLOT_B)]).toEqual([0, 1]);
    expect(await storedKeyId(cli.secretsDir)).toBe(SLOT_B);

    const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    const plan = await cli.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect([status.code, plan.code]).toEqual([0, 0]);
    for (const row of [rows(status).get('billing-api'), rows(plan).get('billing-api')]) {
      const freeAt = Date.parse(row?.lastRotatedAt ?? '') + HOUR_MS;
      expect(row?.slots).toMatchObject({
        ids: [SLOT_A, SLOT_B],
        active: SLOT_B,
        standby: SLOT_A,
        consumerRefreshMs: HOUR_MS,
      });
      expect(Date.parse(row?.slots?.standbyFreeAt ?? '')).toBe(freeAt);
      // The standby next rolls at the entry's next due time (next Monday 03:00), or once it is free if that is later.
      const nextDue = Date.parse(row?.nextDueAt ?? row?.nextRunAt ?? '');
      expect(Date.parse(row?.slots?.standbyNextRollAt ?? '')).toBe(Math.max(nextDue, freeAt));
    }
    // Single-key rows carry no slot fields.
    expect(rows(status).get('key_demo_billing')).not.toHaveProperty('slots');
    expect(rows(plan).get('key_demo_billing')).not.toHaveProperty('slots');

    const statusTable = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);
    expect(statusTable.stdout.split('\n')[0]).toMatch(
      /^KEY\s+ORG\s+LAST ROTATED\s+NEXT DUE\s+OVERDUE\s+SLOTS\s+LOCK\s+INTENT\s+LAST ERROR$/,
    );
    expect(statusTable.stdout).toMatch(
      new RegExp(`^billing-api\\s.*active ${SLOT_B}; standby ${SLOT_A} free from \\S+, next roll \\S+`, 'm'),
    );
    expect(statusTable.stdout).toMatch(
      /^key_demo_billing\s+org_demo_acme\s+\S+\s+\S+\s+no\s+-\s+-\s+-\s+-$/m,
    );
    const planTable = await cli.run(['plan', '-p', 'policy.yaml']);
    expect(planTable.stdout.split('\n')[0]).toMatch(
      /^KEY\s+ORG\s+DUE\s+WHY\s+NEXT SCHEDULED\s+SLOTS\s+WOULD WRITE$/,
    );
    expect(planTable.stdout).toMatch(
      new RegExp(
        `^billing-api\\s+${ORG}\\s+no\\s+-\\s+\\S+\\s+active ${SLOT_B}; would roll ${SLOT_A}, free from \\S+, next roll \\S+\\s+files:billing-api\\.json \\(json\\)$`,
        'm',
      ),
    );
  });

  it('follow the active slot a leak of the standby made: the leaked slot is active now', async () => {
    await runSlotPolicy();
    const leak = await cli.run(['rotate', '--key', SLOT_A, '--reason', 'leak', '--actor', 'test']);
    expect(leak.code, leak.stderr).toBe(0);
    expect(await storedKeyId(cli.secretsDir)).toBe(SLOT_A);
    const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(rows(status).get('billing-api')?.slots).toMatchObject({ active: SLOT_A, standby: SLOT_B });
  });

  it('a fresh entry: slot a active, b standby and free now, both never rotated', async () => {
    await cli.writePolicy({ extraKeys: SLOT_ENTRY });
    const plan = await cli.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect(rows(plan).get('billing-api')?.slots).toMatchObject({
      active: SLOT_A,
      standby: SLOT_B,
      standbyFreeAt: null,
    });
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});

describe('keyroll status --probe', () => {
  it('reports every stored secret and the standby as working, exits 0, and writes nothing', async () => {
    await runSlotPolicy();
    // An alternation, so the previous value kept beside the stored one is the standby's secret.
    const backend = await openFileBackend(cli.secretsDir);
    const state = await backend.readState(SLOT_TARGET);
    await backend.recordRotation(SLOT_TARGET, {
      rotationId: state.lastRotationId ?? '',
      rotatedAt: new Date(Date.now() - 2 * HOUR_MS).toISOString(),
      version: '1',
      keyId: SLOT_B,
    });
    const again = await cli.run([
      'rotate',
      '--key',
      'billing-api',
      '--reason',
      'manual',
      '--force',
      '--actor',
      'test',
    ]);
    expect(again.code, again.stderr).toBe(0);
    expect(await storedKeyId(cli.secretsDir)).toBe(SLOT_A);
    const filesBefore = await snapshotTree(cli.dir);
    const rollsBefore = cli.emulator.state.totalRolls();

    const result = await cli.run(['status', '-p', 'policy.yaml', '--probe', '-o', 'json']);

    expect(result.code, result.stderr).toBe(0);
    const byId = rows(result);
    expect(byId.get('billing-api')).toMatchObject({
      drift: false,
      probe: { stored: 'works', slots: { [SLOT_A]: 'works', [SLOT_B]: 'works' } },
    });
    for (const id of ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'])
      expect(byId.get(id)).toMatchObject({ drift: false, probe: { stored: 'works' } });
    expect(byId.get('key_demo_billing')?.probe).not.toHaveProperty('slots');
    expect(cli.emulator.state.totalRolls()).toBe(rollsBefore);
    expect(await snapshotTree(cli.dir)).toEqual(filesBefore);
  });

  it("finds keys rolled behind keyroll's back (a single key, a slot entry's active slot): dead, drift, exit 1", async () => {
    await runSlotPolicy();
    cli.emulator.state.rollKey('key_demo_search');
    cli.emulator.state.rollKey(SLOT_B);

    const json = await cli.run(['status', '-p', 'policy.yaml', '--probe', '-o', 'json']);
    const table = await cli.run(['status', '-p', 'policy.yaml', '--probe', '-o', 'table']);

    expect([json.code, table.code]).toEqual([1, 1]);
    const byId = rows(json);
    expect(byId.get('key_demo_search')).toMatchObject({ drift: true, probe: { stored: 'dead' } });
    // The first rotation replaced no earlier value: the standby's secret is not kept anywhere.
    expect(byId.get('billing-api')).toMatchObject({
      drift: true,
      probe: { stored: 'dead', slots: { [SLOT_B]: 'dead', [SLOT_A]: 'not-kept' } },
    });
    expect(byId.get('key_demo_billing')).toMatchObject({ drift: false, probe: { stored: 'works' } });
    expect(json.stderr).toContain('drift: the stored secret of key_demo_search no longer works');
    expect(json.stderr).toContain(
      `drift: the stored secret of billing-api (active slot ${SLOT_B}) no longer works`,
    );
    expect(table.stdout).toMatch(/^key_demo_search\s.*\sDEAD \(drift\)\s/m);
    expect(table.stdout).toMatch(
      new RegExp(`^billing-api\\s.*\\s${SLOT_B} DEAD, ${SLOT_A} no previous value kept \\(drift\\)\\s`, 'm'),
    );
    // Read-only: the probe is not recorded, and nothing was healed.
    expect(
      (
        await openFileBackend(cli.secretsDir).then((b) =>
          b.readState({ path: 'search.key', shape: { format: 'raw', secretField: 'apiKey', fields: [] } }),
        )
      ).lastProbe,
    ).toBeUndefined();
    expect(cli.emulator.state.rollCount('key_demo_search')).toBe(2);
  });

  it('a dead standby is reported but is not drift: consumers read the active slot (exit 0)', async () => {
    await runSlotPolicy();
    const backend = await openFileBackend(cli.secretsDir);
    const state = await backend.readState(SLOT_TARGET);
    await backend.recordRotation(SLOT_TARGET, {
      rotationId: state.lastRotationId ?? '',
      rotatedAt: new Date(Date.now() - 2 * HOUR_MS).toISOString(),
      version: '1',
      keyId: SLOT_B,
    });
    expect(
      (await cli.run(['rotate', '--key', 'billing-api', '--reason', 'manual', '--force', '--actor', 'test']))
        .code,
    ).toBe(0);
    cli.emulator.state.rollKey(SLOT_B);

    const result = await cli.run(['status', '-p', 'policy.yaml', '--probe', '-o', 'json']);

    expect(result.code, result.stderr).toBe(0);
    expect(rows(result).get('billing-api')).toMatchObject({
      drift: false,
      probe: { stored: 'works', slots: { [SLOT_A]: 'works', [SLOT_B]: 'dead' } },
    });
  });

  it('without --probe shows the last recorded probe of the stored value, and never calls the API', async () => {
    await runSlotPolicy();
    const backend = await openFileBackend(cli.secretsDir);
    await backend.recordProbe(SLOT_TARGET, { at: new Date().toISOString(), result: 'dead' });
    const callsBefore = cli.emulator.state.callCount('listProjects');

    const json = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    const table = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);

    expect([json.code, table.code]).toEqual([0, 0]);
    expect(rows(json).get('billing-api')?.lastProbe).toMatchObject({ result: 'dead' });
    expect(rows(json).get('billing-api')).not.toHaveProperty('probe');
    expect(rows(json).get('key_demo_billing')?.lastProbe).toBeNull();
    expect(table.stdout.split('\n')[0]).toMatch(/\sSLOTS\s+PROBE\s+LOCK\s/);
    expect(table.stdout).toMatch(new RegExp(`^billing-api\\s.*\\s${SLOT_B} DEAD at \\S+\\s`, 'm'));
    expect(cli.emulator.state.callCount('listProjects')).toBe(callsBefore);
  });

  it('a probe that cannot reach the API leaves the state unknown: probe failed, exit 1, no drift claimed', async () => {
    await runSlotPolicy();
    // The same destinations, an API nobody listens on.
    await cli.writePolicy({ extraKeys: SLOT_ENTRY, baseUrl: 'http://127.0.0.1:9' }, 'unreachable.yaml');

    const result = await cli.run(['status', '-p', 'unreachable.yaml', '--probe', '-o', 'json']);

    expect(result.code).toBe(1);
    const row = rows(result).get('key_demo_billing');
    expect(row).toMatchObject({ drift: false, probe: { stored: 'probe-failed' } });
    expect(row?.probe?.errorCode).toMatch(/^KR_/);
    expect(result.stderr).toContain('key_demo_billing: probe failed');
  });

  it('--help documents --probe and the drift exit code', async () => {
    const result = await cli.run(['status', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('--probe');
    expect(result.stdout).toMatch(/status exits 1 .* with --probe when a stored secret is dead \(drift\)/);
  });
});
