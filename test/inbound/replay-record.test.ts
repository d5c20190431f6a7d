// The trigger's durable replay record: a (caller, nonce) accepted once is refused again, also by a
// record opened afresh on the same directory (a restarted daemon); entries end with the timestamp
// window; the record is bounded; a missing or damaged file makes the daemon refuse every request
// signed before it started.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimOrRefuse, REPLAY_RECORD_FILE, ReplayRecord, ReplayRecordError } from '../../src/inbound/replay-record.ts';

/** The trigger's timestamp window. */
const WINDOW = 300;

const NOW = 1_900_000_000;
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyroll-replay-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('ReplayRecord', () => {
  it('refuses a (caller, nonce) seen before; the same nonce of another caller is its own', async () => {
    const record = await ReplayRecord.open(dir, NOW);
    expect(await record.claim('alice', 'n1', NOW, NOW, WINDOW)).toBe('claimed');
    expect(await record.claim('alice', 'n1', NOW, NOW + 10, WINDOW)).toBe('replay');
    expect(await record.claim('bob', 'n1', NOW, NOW + 10, WINDOW)).toBe('claimed');
  });

  it('remembers across a restart: a record opened again on the same directory refuses the replay', async () => {
    const first = await ReplayRecord.open(dir, NOW);
    expect(await first.claim('alice', 'n1', NOW + 5, NOW + 5, WINDOW)).toBe('claimed');
    const second = await ReplayRecord.open(dir, NOW + 60);
    expect(second.origin).toBe('loaded');
    expect(await second.claim('alice', 'n1', NOW + 5, NOW + 60, WINDOW)).toBe('replay');
    expect(await second.claim('alice', 'n2', NOW + 5, NOW + 60, WINDOW)).toBe('claimed');
  });

  it('is on disk (0600) once claim resolves', async () => {
    const record = await ReplayRecord.open(dir, NOW);
    await record.claim('alice', 'n1', NOW, NOW, WINDOW);
    const text = await readFile(join(dir, REPLAY_RECORD_FILE), 'utf8');
    expect(JSON.parse(text)).toMatchObject({ version: 1, entries: [['alice', 'n1', NOW + WINDOW]] });
  });

  it('forgets entries once their timestamp is past the skew window (the staleness check refuses them from then on)', async () => {
    const record = await ReplayRecord.open(dir, NOW);
    await record.claim('alice', 'n1', NOW, NOW, WINDOW);
    await record.claim('alice', 'n2', NOW + 200, NOW + 200, WINDOW);
    await record.claim('alice', 'n3', NOW + 301, NOW + WINDOW + 1, WINDOW);
    expect(record.size).toBe(2);
    const reopened = await ReplayRecord.open(dir, NOW + 200 + WINDOW + 1);
    expect(reopened.size).toBe(1);
  });

  it('is bounded: at capacity it refuses new requests rather than forget live ones', async () => {
    const record = await ReplayRecord.open(dir, NOW, 2);
    expect(await record.claim('alice', 'a', NOW, NOW, WINDOW)).toBe('claimed');
    expect(await record.claim('alice', 'b', NOW, NOW, WINDOW)).toBe('claimed');
    expect(await record.claim('alice', 'c', NOW, NOW, WINDOW)).toBe('full');
    expect(await record.claim('alice', 'a', NOW, NOW, WINDOW)).toBe('replay');
  });

  it('without a record file (first start, lost volume), refuses requests signed before it opened', async () => {
    const record = await ReplayRecord.open(dir, NOW);
    expect(record.origin).toBe('new');
    expect(await record.claim('alice', 'n1', NOW - 1, NOW, WINDOW)).toBe('signed-before-start');
    expect(await record.claim('alice', 'n2', NOW, NOW, WINDOW)).toBe('claimed');
  });

  it('with a damaged record file, starts afresh and refuses requests signed before it opened', async () => {
    await writeFile(join(dir, REPLAY_RECORD_FILE), '{"version":1,"notBefore":');
    const record = await ReplayRecord.open(dir, NOW);
    expect(record.origin).toBe('unreadable');
    expect(await record.claim('alice', 'n1', NOW - 10, NOW, WINDOW)).toBe('signed-before-start');
  });

  it('throws when the state directory cannot be made, at open (so the daemon does not start)', async () => {
    // A regular file where the directory should be: unwritable even for root.
    await writeFile(join(dir, 'occupied'), 'not a directory');
    await expect(ReplayRecord.open(join(dir, 'occupied', 'state'), NOW)).rejects.toBeInstanceOf(ReplayRecordError);
  });

  it('throws when a claim cannot be written, and keeps no entry for it (the request is refused, a retry may succeed)', async () => {
    const state = join(dir, 'state');
    const record = await ReplayRecord.open(state, NOW);
    await rm(state, { recursive: true });
    await writeFile(state, 'not a directory');
    await expect(record.claim('alice', 'n1', NOW, NOW, WINDOW)).rejects.toBeInstanceOf(ReplayRecordError);
    expect(record.size).toBe(0);
  });
});

describe('claimOrRefuse', () => {
  it('is undefined for a new id, replay for one seen before or signed before the record began, replay-record-full at capacity', async () => {
    const replay = await ReplayRecord.open(join(dir, 'state'), NOW, 1);
    expect(await claimOrRefuse(replay, 'intake:test', 'delivery-1', NOW, NOW, WINDOW)).toBeUndefined();
    expect(await claimOrRefuse(replay, 'intake:test', 'delivery-1', NOW, NOW, WINDOW)).toEqual({ why: 'replay', claim: 'replay' });
    expect(await claimOrRefuse(replay, 'intake:test', 'delivery-2', NOW - 1, NOW, WINDOW)).toEqual({ why: 'replay', claim: 'signed-before-start' });
    expect(await claimOrRefuse(replay, 'intake:test', 'delivery-2', NOW, NOW, WINDOW)).toEqual({ why: 'replay-record-full' });
  });

  it('is replay-record-unavailable without a record and when the record cannot be written', async () => {
    expect(await claimOrRefuse(undefined, 'intake:test', 'delivery-1', NOW, NOW, WINDOW)).toEqual({ why: 'replay-record-unavailable' });
    const replay = await ReplayRecord.open(join(dir, 'state'), NOW, 10);
    await rm(replay.dir, { recursive: true });
    expect(await claimOrRefuse(replay, 'intake:test', 'delivery-1', NOW, NOW, WINDOW)).toEqual({ why: 'replay-record-unavailable' });
  });
});
