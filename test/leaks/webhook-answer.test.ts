// The helpers both leak intake endpoints share: how a replay record's answer becomes a refusal,
// and how a body that is not JSON or not the payload becomes 'invalid-body'.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { claimDelivery, parseBody } from '../../src/leaks/webhook-answer.ts';
import { ReplayRecord } from '../../src/scheduler/replay-record.ts';

const NOW = 1_800_000_000;
let dir: string | undefined;

afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function record(capacity: number): Promise<ReplayRecord> {
  dir = await mkdtemp(join(tmpdir(), 'keyroll-webhook-answer-'));
  return ReplayRecord.open(join(dir, 'state'), NOW, capacity);
}

describe('claimDelivery', () => {
  it('is undefined for a new delivery, replay for one seen before or signed before the record began, replay-record-full at capacity', async () => {
    const replay = await record(1);
    expect(await claimDelivery(replay, 'intake:test', 'delivery-1', NOW, NOW)).toBeUndefined();
    expect(await claimDelivery(replay, 'intake:test', 'delivery-1', NOW, NOW)).toBe('replay');
    expect(await claimDelivery(replay, 'intake:test', 'delivery-2', NOW - 1, NOW)).toBe('replay');
    expect(await claimDelivery(replay, 'intake:test', 'delivery-2', NOW, NOW)).toBe('replay-record-full');
  });

  it('is replay-record-unavailable without a record and when the record cannot be written', async () => {
    expect(await claimDelivery(undefined, 'intake:test', 'delivery-1', NOW, NOW)).toBe('replay-record-unavailable');
    const replay = await record(10);
    await rm(replay.dir, { recursive: true });
    expect(await claimDelivery(replay, 'intake:test', 'delivery-1', NOW, NOW)).toBe('replay-record-unavailable');
  });
});

describe('parseBody', () => {
  const Payload = z.object({ action: z.string() });

  it('returns the parsed payload, or undefined for a body that is not JSON or not the payload', () => {
    expect(parseBody(Buffer.from('{"action":"created","extra":1}'), Payload)).toEqual({ action: 'created' });
    expect(parseBody(Buffer.from('{"action":'), Payload)).toBeUndefined();
    expect(parseBody(Buffer.from('{"action":7}'), Payload)).toBeUndefined();
  });
});
