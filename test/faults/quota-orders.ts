// The orders of issue 27 (finding 1) in which the write a rotation reserved before its roll could
// be spent by something else, on moto behind the quota proxy: a lock refresh between the
// reservation and the roll, and a second AWS destination (its fenced write and the locks'
// refresh after the primary's write). Other keys of the process book the account's next writes
// far past `quotas.maxWaitMs`, the way an emergency over many keys does: a call after the roll
// that has to wait for its turn fails, and the rolled secret with it.
import { expect, type TestContext } from 'vitest';
import { createAuditLog } from '../../src/audit/logger.ts';
import { createBackend } from '../../src/backends/registry.ts';
import type { Backend, StoreTarget, WriteReservation } from '../../src/backends/types.ts';
import type { BackendConfig } from '../../src/backends/config.ts';
import type { Policy } from '../../src/policy/schema.ts';
import type { RunSummary } from '../../src/rotation/run.ts';
import { wrapBackend } from '../rotation/harness.ts';
import type { ArmedFault } from './arm.ts';
import type { CaseKey, FaultBench } from './bench.ts';
import { isUsable, judgeCase } from './judge.ts';
import {
  NEXT_RUN_LATER_MS,
  SETTLE_RUN_LATER_MS,
  markerHeldForSafety,
  resultOf,
  runKeyroll,
} from './run-case.ts';

/** keyroll's wait limit in these cases, and how far ahead the other keys book the write quota. */
export const ORDER_MAX_WAIT_MS = 3_000;
const BOOKED_AHEAD_MS = 5_000;

export type QuotaOrder = 'refresh between the reservation and the roll' | 'a second AWS destination';

/** Another runner's keys in this process: reservations on the same account's write quota. */
async function bookTheAccount(
  bench: FaultBench,
  config: BackendConfig,
  shape: StoreTarget['shape'],
): Promise<{ book(): Promise<void>; release(): Promise<void> }> {
  if (config.kind !== 'aws') throw new Error('the quota orders run on AWS');
  // The same endpoint, region and rate: the same shared bucket. A long wait limit: every booking is taken.
  const others = await createBackend(
    'other-keys',
    { ...config, quotas: { ...config.quotas, maxWaitMs: 600_000 } } as BackendConfig,
    { env: { ...bench.store.env } },
  );
  const pending: Promise<WriteReservation | undefined>[] = [];
  const writesPerSecond = config.quotas?.writesPerSecond ?? 50;
  return {
    book: async () => {
      // Each fenced write of another key reserves 2 writes; enough of them to fill BOOKED_AHEAD_MS.
      const count = Math.ceil(((BOOKED_AHEAD_MS / 1000) * writesPerSecond) / 2);
      for (let i = 0; i < count; i++)
        pending.push(
          others.reserveWrite?.({ path: `other-keys/${String(i)}`, shape }, { fenced: true }) ??
            Promise.resolve(undefined),
        );
      // Let every booking take its turn (they then sleep until it comes).
      await new Promise((resolve) => setTimeout(resolve, 50));
    },
    release: async () => {
      for (const reservation of await Promise.all(pending)) reservation?.release();
      await others.close();
    },
  };
}

export async function runQuotaOrderCase(
  ctx: TestContext,
  bench: FaultBench,
  order: QuotaOrder,
): Promise<void> {
  const key: CaseKey = await bench.newKey(`quota order: ${order}`);
  const policy: Policy = bench.policy([key], { safetyNet: 'none', sinkUrl: `${bench.receiver.url}/alerts` });
  const primary = policy.backends.primary;
  if (primary?.kind !== 'aws') throw new Error('the AWS store is the primary');
  const config = {
    ...primary,
    quotas: {
      writesPerSecond: 50,
      tagsPerSecond: 50,
      readsPerSecond: 10_000,
      createsPerSecond: 50,
      shareAmongShards: true,
      maxWaitMs: ORDER_MAX_WAIT_MS,
      versionsPerSecret: 100,
    },
  };
  policy.backends.primary = config;
  const second: StoreTarget = { ...key.target, path: `${key.target.path}-copy` };
  const [entry] = policy.keys;
  if (entry === undefined) throw new Error('one key');
  if (order === 'a second AWS destination') {
    // The copy holds the key's value already, as after an earlier rotation.
    const seeded = await bench.store.direct.readSecret(key.target);
    if (seeded === undefined) throw new Error('the seed is stored');
    await bench.store.direct.writeSecret(second, {
      secret: seeded.secret,
      keyId: key.keyId,
      organizationId: key.organizationId,
      rotationId: `seed-copy-${key.keyId}`,
      rotatedAt: new Date().toISOString(),
    });
    entry.destinations = [...entry.destinations, { backend: 'primary', target: second }];
  }

  const booking = await bookTheAccount(bench, config, key.target.shape);
  let offsetMs = 0;
  let reservations = 0;
  let booked = false;
  let storing = false;
  const pacedWhileStoring: string[] = [];
  const armed: ArmedFault = {
    monotonicMs: () => performance.now() + offsetMs,
    // The roll is next (every reservation is made): other keys book the account now.
    checkpoint: async (step) => {
      if (step !== 'roll' || order !== 'a second AWS destination' || booked) return;
      booked = true;
      await booking.book();
    },
    observer: {
      stepDuration: () => undefined,
      exposure: () => undefined,
      paced: (event) => {
        if (storing) pacedWhileStoring.push(`${event.group} ${event.operation} ${event.path}`);
      },
    },
    wrapBackend: (name: string, backend: Backend) => {
      if (name !== 'primary') return backend;
      return wrapBackend(backend, {
        reserveWrite: async (next) => {
          const reservation = await next();
          reservations++;
          // The lease runs short before the attempt: the engine refreshes the lock before it rolls.
          if (order === 'refresh between the reservation and the roll') offsetMs += entry.lockTtlMs;
          return reservation;
        },
        refreshLock: async (next) => {
          const refreshed = await next();
          if (order === 'refresh between the reservation and the roll' && reservations > 0 && !booked) {
            booked = true;
            await booking.book();
          }
          return refreshed;
        },
        writeSecret: async (next, target) => {
          storing = true;
          try {
            return await next();
          } finally {
            if (target.path === entry.destinations.at(-1)?.target.path) storing = false;
          }
        },
      });
    },
    restore: () => Promise.resolve(),
  };

  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const bodiesBefore = bench.receiver.requests.length;
  let first: RunSummary;
  try {
    first = await runKeyroll(bench, policy, audit, armed);
  } finally {
    storing = false;
    await booking.release();
  }
  const usableAfterFault = isUsable(await bench.copiesOf(key), bench.emulator);
  const intentAfterFault = (await bench.store.direct.readState(key.target)).intent !== undefined;
  // The next run, and the one after it when the next one kept the marker for safety (run-case.ts).
  const linesBeforeNext = lines.length;
  let next = await runKeyroll(bench, policy, audit, {}, () => new Date(Date.now() + NEXT_RUN_LATER_MS));
  const runs = [first, next];
  if (
    markerHeldForSafety((await bench.store.direct.readState(key.target)).intent, lines.slice(linesBeforeNext))
  ) {
    next = await runKeyroll(bench, policy, audit, {}, () => new Date(Date.now() + SETTLE_RUN_LATER_MS));
    runs.push(next);
  }
  const verdict = judgeCase({
    keys: [
      {
        keyId: key.keyId,
        usableAfterFault,
        intentAfterFault,
        usableAfterNext: isUsable(await bench.copiesOf(key), bench.emulator),
        intentAfterNext: (await bench.store.direct.readState(key.target)).intent !== undefined,
      },
    ],
    runs,
    auditLines: lines,
    alertBodies: bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
    otherOutput: [JSON.stringify(runs), ...(await bench.leftovers(key))],
    emulator: bench.emulator,
  });
  const result = resultOf(first, key.keyId);
  verdict.record(ctx, {
    case: `store × ${order}, the account's writes booked by other keys (aws)`,
    fault: `AWS quota booked by other keys: ${order}`,
    backend: 'aws',
    step: 'store',
    result,
  });
  const outcome = first.outcomes.find((o) => o.keyId === key.keyId);
  verdict.assertInvariants();
  expect(booked, 'the other keys booked the account').toBe(true);
  expect(
    result,
    `the run with ${order}: ${String(outcome?.step)} ${String(outcome?.errorCode)} ${String(outcome?.detail)}`,
  ).toBe('rotated');
  // Invariants 2 and 11: from the roll answer to the last destination's write, nothing waited for a turn.
  expect(pacedWhileStoring, 'calls that waited for a quota turn during the store').toEqual([]);
  expect(resultOf(next, key.keyId), 'the next run').toMatch(/^(rotated|recovered|skipped)$/);
}

/**
 * Issue 27, finding 7: a secret at AWS's version quota (the quota proxy refuses a put over it with
 * LimitExceededException, as AWS does). The lock's put before the roll would still fit and the
 * value's put after it not: the rotation must be refused before its lock, nothing rolled, alerted
 * with the code that names the quota.
 */
export async function runVersionQuotaCase(ctx: TestContext, bench: FaultBench): Promise<void> {
  const quota = bench.store.quota;
  if (quota === undefined) throw new Error('the version quota case needs the AWS quota proxy');
  const key: CaseKey = await bench.newKey('a secret at its version quota');
  const seeded = await bench.store.direct.readSecret(key.target);
  if (seeded === undefined) throw new Error('the seed is stored');
  // Other writers filled the secret to one version under AWS's 100 (the seed is the first).
  for (let i = 1; i < 99; i++) {
    await bench.store.direct.writeSecret(key.target, {
      secret: seeded.secret,
      keyId: key.keyId,
      organizationId: key.organizationId,
      rotationId: `filler-${String(i)}-${key.keyId}`,
      rotatedAt: new Date().toISOString(),
    });
  }
  const refusedBefore = quota.refusedForVersions();
  const policy: Policy = bench.policy([key], { safetyNet: 'none', sinkUrl: `${bench.receiver.url}/alerts` });
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const bodiesBefore = bench.receiver.requests.length;
  const rollsBefore = bench.emulator.state.rollCount(key.keyId);
  const first = await runKeyroll(bench, policy, audit, {});
  const usable = isUsable(await bench.copiesOf(key), bench.emulator);
  const intent = (await bench.store.direct.readState(key.target)).intent !== undefined;
  const alertBodies = bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw);
  const verdict = judgeCase({
    keys: [
      {
        keyId: key.keyId,
        usableAfterFault: usable,
        intentAfterFault: intent,
        usableAfterNext: usable,
        intentAfterNext: intent,
      },
    ],
    runs: [first],
    auditLines: lines,
    alertBodies,
    otherOutput: [JSON.stringify(first), ...(await bench.leftovers(key))],
    emulator: bench.emulator,
  });
  const result = resultOf(first, key.keyId);
  const outcome = first.outcomes.find((o) => o.keyId === key.keyId);
  verdict.record(ctx, {
    case: 'preflight × a secret at its version quota (aws)',
    fault: 'AWS version quota of the secret full',
    backend: 'aws',
    step: 'preflight',
    result,
  });
  verdict.assertInvariants();
  expect(
    outcome,
    `the run: ${String(outcome?.step)} ${String(outcome?.errorCode)} ${String(outcome?.detail)}`,
  ).toMatchObject({ result: 'failed', step: 'preflight', errorCode: 'KR_BACKEND_VERSION_QUOTA', rolls: 0 });
  expect(bench.emulator.state.rollCount(key.keyId), 'rolls').toBe(rollsBefore);
  // Named: the secret, and the quota.
  expect(
    alertBodies.some((body) => body.includes('KR_BACKEND_VERSION_QUOTA') && body.includes(key.target.path)),
    'an alert names the code and the secret',
  ).toBe(true);
  // Refused before the lock: keyroll never sent a put AWS would refuse.
  expect(quota.refusedForVersions() - refusedBefore, 'puts refused for the version quota').toBe(0);
  expect(usable, 'the stored secret still works').toBe(true);
}
