// Invariant 5 on the test server itself: the AWS key lock is a compare-and-swap whose first step
// (the first lock of a place: CreateSecret of the companion, or PutSecretValue with the fixed
// first-lock ClientRequestToken on the target) relies on AWS refusing the second of two requests
// racing for one name or one version id. moto's Secrets Manager checks and then adds, in a threaded
// server, so without the one-request-at-a-time wrapper (scripts/moto-server.py) both racers could
// be told they won, and both acquireLock calls came back acquired (once, at load 16). These tests
// race many pairs, one pair after another, directly on moto and through acquireLock at both lock
// places, and count the double wins: AWS never gives one, so neither may the test server.
// Load makes the race: a thread descheduled inside moto's check-then-add for longer than Python's
// thread switch interval (5 ms) is made to hand over to the other request's thread right there. So
// that the race is hit on purpose, not by luck, this file starts its own moto the way the project
// starts it (startMoto) with a switch interval of 1 µs (a sitecustomize.py on PYTHONPATH): the
// threads hand over all the time, as under a heavy load. Without the wrapper the two direct cases
// counted double wins in every run, and the companion's acquireLock pairs did too (docs/design.md,
// "Tests use real servers"); the target's first lock (the companion's seal first, so its two puts
// reach moto less closely together) did not hit the window in 80 pairs.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { MOTO_ENV, startMoto, type RunningServer } from '../support/local-servers.ts';
import { makeBackend, newTarget, run, sdkClient } from './aws-fixtures.ts';
import { motoServer, type MotoServer } from './servers.ts';

// The shared moto's presence says whether the servers are installed (and fails the run under CI=true).
const moto = motoServer();
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Starts moto as the project does, with Python threads that hand over every microsecond. */
async function startRacyMoto(dir: string): Promise<RunningServer> {
  const { stdout } = await promisify(execFile)(resolve(ROOT, 'scripts/test-servers.sh'), [], { cwd: ROOT });
  const binDir = stdout.trim().split('\n').pop() ?? '';
  await writeFile(join(dir, 'sitecustomize.py'), 'import sys\nsys.setswitchinterval(1e-6)\n');
  // startMoto passes this process's environment on; PYTHONPATH is set only while it spawns.
  const before = process.env.PYTHONPATH;
  process.env.PYTHONPATH = dir;
  try {
    return await startMoto(binDir);
  } finally {
    if (before === undefined) delete process.env.PYTHONPATH;
    else process.env.PYTHONPATH = before;
  }
}

/**
 * Pairs raced per case, one pair after another (the two requests of a pair then reach moto together,
 * which many pairs at once would spread out): enough that an unguarded moto's window is hit.
 */
const PAIRS = 200;
const LOCK_TIMEOUT_MS = 580_000;
const RACERS = 2;

/** `race(i)` for i < pairs, one after another; how many came back true. */
async function countOf(race: (pair: number) => Promise<boolean>, pairs = PAIRS): Promise<number> {
  let count = 0;
  for (let pair = 0; pair < pairs; pair++) if (await race(pair)) count += 1;
  return count;
}

async function succeeded(send: () => Promise<unknown>): Promise<boolean> {
  try {
    await send();
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(moto === undefined)('aws lock races on moto', () => {
  let racy: RunningServer | undefined;
  let dir: string | undefined;
  let server: MotoServer;
  // One client per racer, as two runners are two processes with connections of their own.
  let clients: SecretsManagerClient[];
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'keyroll-racy-moto-'));
    racy = await startRacyMoto(dir);
    server = {
      endpoint: racy.url,
      region: MOTO_ENV.AWS_REGION,
      accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID,
      secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY,
    };
    clients = Array.from({ length: RACERS }, () => sdkClient(server));
  });
  afterAll(async () => {
    for (const client of clients) client.destroy();
    await racy?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('CreateSecret of one name succeeds for exactly one of two racers', async () => {
    const doubleWins = await countOf(async (pair) => {
      const name = `keyroll-test/${run}/race-create-${String(pair)}`;
      const wins = await Promise.all(
        clients.map((client) =>
          succeeded(() =>
            client.send(
              new CreateSecretCommand({
                Name: name,
                SecretString: randomUUID(),
                ClientRequestToken: randomUUID(),
              }),
            ),
          ),
        ),
      );
      return wins.filter(Boolean).length > 1;
    });
    expect(doubleWins).toBe(0);
  });

  it('PutSecretValue of one ClientRequestToken with two values succeeds for exactly one of two racers', async () => {
    const token = 'keyroll-race-first-version-000000000000';
    const doubleWins = await countOf(async (pair) => {
      const name = `keyroll-test/${run}/race-put-${String(pair)}`;
      await clients[0]!.send(new CreateSecretCommand({ Name: name, SecretString: 'first' }));
      const wins = await Promise.all(
        clients.map((client) =>
          succeeded(() =>
            client.send(
              new PutSecretValueCommand({
                SecretId: name,
                SecretString: randomUUID(),
                ClientRequestToken: token,
                VersionStages: ['KEYROLL_RACE'],
              }),
            ),
          ),
        ),
      );
      return wins.filter(Boolean).length > 1;
    });
    expect(doubleWins).toBe(0);
  });

  // `pairs`: acquireLock pairs raced (each is several requests, so fewer than the direct cases').
  const places: { where: string; pairs: number; target: (writer: Backend) => Promise<StoreTarget> }[] = [
    {
      pairs: 100,
      where: 'on the secret itself (first lock: PutSecretValue with the first-lock token)',
      target: async (writer) => {
        const t = newTarget();
        await writer.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
        return t;
      },
    },
    {
      pairs: 400,
      where: 'in the companion (first lock: CreateSecret)',
      target: () => Promise.resolve(newTarget()),
    },
  ];

  it.each(places)(
    'the first lock $where goes to exactly one of two runners',
    async ({ target, pairs }) => {
      const clock = createTestClock();
      // Two runners: two processes, each with its own client, sightings and facts.
      const runners = [makeBackend(server, clock), makeBackend(server, clock)];
      try {
        const outcomes: number[] = [];
        const doubleWins = await countOf(async (pair) => {
          const t = await target(runners[0]!);
          const acquired = await Promise.all(
            runners.map((r, i) =>
              r.acquireLock(t, {
                owner: `owner-${String(i)}`,
                rotationId: `rot-${String(pair)}-${String(i)}`,
                ttlMs: 60_000,
              }),
            ),
          );
          const won = acquired.filter((o) => o.acquired).length;
          outcomes.push(won);
          return won > 1;
        }, pairs);
        expect(doubleWins).toBe(0);
        expect(outcomes.every((won) => won === 1)).toBe(true);
      } finally {
        await Promise.all(runners.map((r) => r.close()));
      }
    },
    LOCK_TIMEOUT_MS,
  );
});
