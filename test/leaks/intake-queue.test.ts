// The leak intake's background jobs: a few run at once, the rest wait their turn, and no more
// than the capacity are ever taken (running, waiting or reserved).
import { describe, expect, it } from 'vitest';
import { IntakeQueue } from '../../src/leaks/intake-queue.ts';

function queue(concurrency: number, capacity: number): { queue: IntakeQueue; work: Promise<void>[] } {
  const work: Promise<void>[] = [];
  return {
    queue: new IntakeQueue({
      concurrency,
      reconcileConcurrency: 1,
      capacity,
      background: (promise) => work.push(promise),
    }),
    work,
  };
}

describe('IntakeQueue', () => {
  it('runs at most `concurrency` jobs at once; the others start in order as runners free up', async () => {
    const { queue: jobs, work } = queue(2, 10);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const gates = Array.from({ length: 5 }, () => Promise.withResolvers<undefined>());
    gates.forEach((gate, index) => {
      jobs.reserve()?.run(async () => {
        running += 1;
        most = Math.max(most, running);
        order.push(index);
        await gate.promise;
        running -= 1;
      });
    });
    await Promise.resolve();
    expect(order).toEqual([0, 1]);
    for (const gate of gates) gate.resolve(undefined);
    await Promise.all(work);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(jobs.size).toBe(0);
  });

  it('gives no place past its capacity; a released place and a finished job free theirs', async () => {
    const { queue: jobs, work } = queue(1, 2);
    const first = jobs.reserve();
    const second = jobs.reserve();
    expect(jobs.reserve()).toBeUndefined();
    second?.release();
    expect(jobs.size).toBe(1);
    first?.run(() => Promise.reject(new Error('a job that throws does not stop the queue')));
    await Promise.all(work);
    expect(jobs.size).toBe(0);
    expect(jobs.reserve()).toBeDefined();
  });

  it('runs each lane on its own runners and counts both in one capacity', async () => {
    const { queue: jobs, work } = queue(1, 3);
    const started: string[] = [];
    const gates = new Map<string, PromiseWithResolvers<undefined>>();
    const start = (lane: 'delivery' | 'reconcile', name: string): void => {
      const gate = Promise.withResolvers<undefined>();
      gates.set(name, gate);
      jobs.reserve(lane)?.run(async () => {
        started.push(name);
        await gate.promise;
      });
    };
    start('reconcile', 'reconciled-1');
    start('delivery', 'delivery-1');
    start('reconcile', 'reconciled-2');
    await new Promise((resolve) => setImmediate(resolve));
    // One runner each: the delivery did not wait for the reconcile's job, the second reconciled one does.
    expect(started).toEqual(['reconciled-1', 'delivery-1']);
    expect(jobs.reserve('delivery')).toBeUndefined();
    gates.get('reconciled-1')?.resolve(undefined);
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['reconciled-1', 'delivery-1', 'reconciled-2']);
    for (const gate of gates.values()) gate.resolve(undefined);
    await Promise.all(work);
    expect(jobs.size).toBe(0);
  });
});
