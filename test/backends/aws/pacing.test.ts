// The write budget a rotation reserves before its roll (src/backends/aws/pacing.ts) is spent only by
// the calls run inside the reservation's `use` (issue 27, finding 1): another call on the same secret
// (the key lock's refresh) waits for its own turn.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AwsPacer } from '../../../src/backends/aws/pacing.ts';
import { AwsQuotas } from '../../../src/backends/aws/quotas.ts';
import { BackendError } from '../../../src/backends/errors.ts';

/** 2 writes per second (a burst of 1) and 100 ms of wait at most: a second write has no turn in time. */
function pacer(): AwsPacer {
  const scope = `test ${randomUUID()}`;
  return new AwsPacer({
    backendName: 'aws',
    quotas: AwsQuotas.parse({ writesPerSecond: 2, maxWaitMs: 100 }),
    deps: {},
    scope: () => Promise.resolve(scope),
  });
}

const put = { action: 'PutSecretValue', operation: 'write', path: 'app/key' } as const;
const refresh = { action: 'PutSecretValue', operation: 'lock', path: 'app/key' } as const;
const sent = (): Promise<string> => Promise.resolve('sent');

describe('AwsPacer reservations', () => {
  it('a call on the reserved secret outside the reservation does not spend it: it waits for its own turn', async () => {
    const pacing = pacer();
    const reservation = await pacing.reserve('app/key', { write: 1 });
    // The lock's refresh on the same secret: no turn within 100 ms, the reserved one is not its.
    await expect(pacing.send(refresh, sent)).rejects.toMatchObject({ code: 'KR_BACKEND_THROTTLED' });
    // The write the reservation was made for is still sent at once.
    await expect(reservation.use(() => pacing.send(put, sent))).resolves.toBe('sent');
    reservation.release();
  });

  it('inside use, only the reserved count is sent at once; the next call waits like any other', async () => {
    const pacing = pacer();
    const reservation = await pacing.reserve('app/key', { write: 1 });
    await reservation.use(async () => {
      await expect(pacing.send(put, sent)).resolves.toBe('sent');
      const error: unknown = await pacing.send(put, sent).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(BackendError);
    });
    reservation.release();
  });

  it('a reservation for another secret, or another pacer, is not spent', async () => {
    const pacing = pacer();
    const reservation = await pacing.reserve('app/other', { write: 1 });
    await expect(reservation.use(() => pacing.send(put, sent))).rejects.toMatchObject({
      code: 'KR_BACKEND_THROTTLED',
    });
    reservation.release();
  });

  it('release gives back what was not spent: the next caller gets the turn', async () => {
    const pacing = pacer();
    const reservation = await pacing.reserve('app/key', { write: 1 });
    reservation.release();
    await expect(pacing.send(refresh, sent)).resolves.toBe('sent');
  });
});
