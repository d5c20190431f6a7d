// The AWS lock secret under contention, on moto: several runners racing for one stale lock,
// and the compare-and-swap interleaving forced step by step.
import { describe, expect, it } from 'vitest';
import { SecretsManagerCalls } from '../../src/backends/aws/client.ts';
import { acquireLock } from '../../src/backends/aws/lock.ts';
import { createTestClock } from '../backends/contract.ts';
import { makeBackend, newTarget } from './aws-fixtures.ts';
import { motoServer } from './servers.ts';

const moto = motoServer();

describe.skipIf(moto === undefined)('aws lock (moto)', () => {
  const server = moto!;

  describe('stale lock takeover', () => {
    it('goes to exactly one of several runners racing for the same stale lock', async () => {
      const clock = createTestClock();
      const runners = [makeBackend(server, clock), makeBackend(server, clock), makeBackend(server, clock)];
      try {
        for (let round = 0; round < 5; round++) {
          const t = newTarget();
          const [first] = runners;
          expect((await first!.acquireLock(t, { owner: 'old', rotationId: 'old', ttlMs: 1_000 })).acquired).toBe(true);
          clock.advance(2_000);
          const outcomes = await Promise.all(runners.map((r, i) => r.acquireLock(t, { owner: `taker-${String(i)}`, rotationId: `rot-${String(i)}`, ttlMs: 60_000 })));
          const winners = outcomes.filter((o) => o.acquired);
          expect(winners).toHaveLength(1);
          const winner = winners[0]!.lock;
          expect(winner.tookOver).toBe(true);
          for (const loser of outcomes.filter((o) => !o.acquired)) expect(loser.holder.owner).toBe(winner.owner);
          expect((await first!.readState(t)).lock?.owner).toBe(winner.owner);
        }
      } finally {
        await Promise.all(runners.map((r) => r.close()));
      }
    });
  });

  describe('lock compare-and-swap', () => {
    // Both takers read the same stale version and put their candidates before either moves
    // AWSCURRENT: the interleaving a timing race only sometimes produces, forced by a gate.
    class GatedCalls extends SecretsManagerCalls {
      readonly arrived: Promise<void>;
      readonly moves: ('moved' | 'stale')[] = [];
      #arrive: () => void = () => undefined;
      #open: () => void = () => undefined;
      readonly #gate: Promise<void>;

      constructor() {
        super({ backendName: 'gated', endpoint: server.endpoint, region: server.region, timeoutMs: 10_000, credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey } });
        this.arrived = new Promise((resolve) => (this.#arrive = resolve));
        this.#gate = new Promise((resolve) => (this.#open = resolve));
      }

      open(): void {
        this.#open();
      }

      override async moveCurrentStage(...args: Parameters<SecretsManagerCalls['moveCurrentStage']>): Promise<'moved' | 'stale'> {
        this.#arrive();
        await this.#gate;
        const outcome = await super.moveCurrentStage(...args);
        this.moves.push(outcome);
        return outcome;
      }
    }

    it('refuses the second move of AWSCURRENT from the same stale version', async () => {
      const clock = createTestClock();
      const t = newTarget();
      const first = makeBackend(server, clock);
      const [a, b] = [new GatedCalls(), new GatedCalls()];
      const context = (calls: SecretsManagerCalls) => ({ calls, backendName: 'gated', tags: {}, now: clock.now });
      try {
        expect((await first.acquireLock(t, { owner: 'old', rotationId: 'old', ttlMs: 1_000 })).acquired).toBe(true);
        clock.advance(2_000);
        const takeA = acquireLock(context(a), t.path, { owner: 'a', rotationId: 'rot-a', ttlMs: 60_000 });
        const takeB = acquireLock(context(b), t.path, { owner: 'b', rotationId: 'rot-b', ttlMs: 60_000 });
        await Promise.all([a.arrived, b.arrived]);
        a.open();
        expect(await takeA).toMatchObject({ acquired: true, lock: { owner: 'a', tookOver: true } });
        b.open();
        expect(await takeB).toEqual({ acquired: false, holder: expect.objectContaining({ owner: 'a' }) as unknown });
        expect(b.moves).toEqual(['stale']);
      } finally {
        await Promise.all([first.close(), a.close(), b.close()]);
      }
    });
  });
});
