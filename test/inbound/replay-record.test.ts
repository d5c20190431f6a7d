// A source's durable replay record: an id accepted once is refused again, also by a record opened
// afresh on the same file (a restarted daemon); entries end at their expiry; the record is
// bounded; a missing or damaged file makes it refuse whatever was signed before it opened; a claim
// appends one line to the file whatever the record's size, and the file is compacted so it stays
// bounded; each source has its own record, so one filling up leaves the others alone.
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimOrRefuse, ReplayRecordError } from '../../src/inbound/replay-claim.ts';
import { FileReplayRecord } from '../../src/inbound/replay-record.ts';
import { REPLAY_RECORD_FILES, ReplayRecords } from '../../src/inbound/replay-records.ts';
import { useTempDir } from '../support/temp-dir.ts';

const NOW = 1_900_000_000;
const FILE = 'replay-test.jsonl';
/** The trigger's timestamp window. */
const WINDOW = 300;
const dir = useTempDir('keyroll-replay-');

const open = (now = NOW, capacity?: number): Promise<FileReplayRecord> =>
  FileReplayRecord.open(dir.path(), FILE, now, capacity);
const fileLines = async (): Promise<string[]> =>
  (await readFile(join(dir.path(), FILE), 'utf8')).split('\n').filter(Boolean);

describe('ReplayRecord', () => {
  it('refuses an id seen before; another id is its own', async () => {
    const record = await open();
    expect(await record.claim('alice\nn1', NOW + WINDOW, NOW, NOW)).toBe('claimed');
    expect(await record.claim('alice\nn1', NOW + WINDOW, NOW + 10, NOW)).toBe('replay');
    expect(await record.claim('bob\nn1', NOW + WINDOW, NOW + 10, NOW)).toBe('claimed');
  });

  it('remembers across a restart: a record opened again on the same file refuses the replay', async () => {
    const first = await open();
    expect(await first.claim('alice\nn1', NOW + 5 + WINDOW, NOW + 5, NOW + 5)).toBe('claimed');
    const second = await open(NOW + 60);
    expect(second.origin).toBe('loaded');
    expect(await second.claim('alice\nn1', NOW + 5 + WINDOW, NOW + 60, NOW + 5)).toBe('replay');
    expect(await second.claim('alice\nn2', NOW + 5 + WINDOW, NOW + 60, NOW + 5)).toBe('claimed');
  });

  it('is on disk (0600) once claim resolves', async () => {
    const record = await open();
    await record.claim('digest-1', NOW + 3600, NOW);
    expect(await fileLines()).toEqual([
      JSON.stringify({ version: 2, notBefore: NOW }),
      JSON.stringify(['digest-1', NOW + 3600]),
    ]);
    expect((await stat(join(dir.path(), FILE))).mode & 0o777).toBe(0o600);
  });

  it('forgets entries once they expire, in memory and when read back', async () => {
    const record = await open();
    await record.claim('n1', NOW + WINDOW, NOW, NOW);
    await record.claim('n2', NOW + 200 + WINDOW, NOW + 200, NOW + 200);
    await record.claim('n3', NOW + 301 + WINDOW, NOW + WINDOW + 1, NOW + 301);
    expect(record.size).toBe(2);
    expect(await record.claim('n1', NOW + 400 + WINDOW, NOW + 400, NOW + 400)).toBe('claimed');
    const reopened = await open(NOW + 200 + WINDOW + 1);
    expect(reopened.size).toBe(2);
    expect(await reopened.claim('n2', NOW + 900, NOW + 200 + WINDOW + 1)).toBe('claimed');
  });

  it('is bounded: at capacity it refuses new ids rather than forget live ones', async () => {
    const record = await open(NOW, 2);
    expect(await record.claim('a', NOW + WINDOW, NOW)).toBe('claimed');
    expect(await record.claim('b', NOW + WINDOW, NOW)).toBe('claimed');
    expect(await record.claim('c', NOW + WINDOW, NOW)).toBe('full');
    expect(await record.claim('a', NOW + WINDOW, NOW)).toBe('replay');
  });

  it('without a record file (first start, lost volume), refuses what was signed before it opened', async () => {
    const record = await open();
    expect(record.origin).toBe('new');
    expect(await record.claim('n1', NOW + WINDOW, NOW, NOW - 1)).toBe('signed-before-start');
    expect(await record.claim('n2', NOW + WINDOW, NOW, NOW)).toBe('claimed');
    // A sender that signs no time (GitHub) has nothing to compare.
    expect(await record.claim('digest', NOW + 3600, NOW)).toBe('claimed');
  });

  it('with a damaged record file, refuses what was signed before it opened, and still refuses the ids it could read', async () => {
    await writeFile(
      join(dir.path(), FILE),
      `${JSON.stringify({ version: 2, notBefore: NOW - 100 })}\n${JSON.stringify(['kept', NOW + 100])}\n{"damaged\n`,
    );
    const record = await open();
    expect(record.origin).toBe('unreadable');
    expect(await record.claim('n1', NOW + WINDOW, NOW, NOW - 10)).toBe('signed-before-start');
    expect(await record.claim('kept', NOW + WINDOW, NOW)).toBe('replay');
  });

  it('a last line cut short by a crash is no damage: that claim was never acknowledged', async () => {
    const first = await open();
    await first.claim('acknowledged', NOW + WINDOW, NOW, NOW);
    await writeFile(join(dir.path(), FILE), `${(await fileLines()).join('\n')}\n["cut-sho`);
    const second = await open(NOW + 1);
    expect(second.origin).toBe('loaded');
    expect(await second.claim('acknowledged', NOW + WINDOW, NOW + 1, NOW)).toBe('replay');
    expect(await second.claim('cut-short', NOW + WINDOW, NOW + 1, NOW)).toBe('claimed');
    expect(await fileLines()).toHaveLength(3);
  });

  it('claims at once are each on disk when they resolve, and refuse each other when they repeat', async () => {
    const record = await open();
    const ids = Array.from({ length: 200 }, (_, i) => `concurrent-${String(i)}`);
    const claims = await Promise.all([...ids, ...ids].map((id) => record.claim(id, NOW + WINDOW, NOW)));
    expect(claims.filter((claim) => claim === 'claimed')).toHaveLength(200);
    expect(claims.filter((claim) => claim === 'replay')).toHaveLength(200);
    const reopened = await open(NOW + 1);
    expect(reopened.size).toBe(200);
  });

  it('appends one line per claim to the same file however large the record is', async () => {
    const filler = Array.from({ length: 5000 }, (_, i) =>
      JSON.stringify([`filler-${String(i)}`, NOW + WINDOW]),
    );
    await writeFile(
      join(dir.path(), FILE),
      `${[JSON.stringify({ version: 2, notBefore: NOW }), ...filler].join('\n')}\n`,
    );
    const record = await open();
    expect(record.size).toBe(5000);
    const before = await stat(join(dir.path(), FILE));
    await record.claim('one-more', NOW + WINDOW, NOW);
    const after = await stat(join(dir.path(), FILE));
    expect(after.ino).toBe(before.ino);
    expect(after.size - before.size).toBe(`${JSON.stringify(['one-more', NOW + WINDOW])}\n`.length);
  });

  it('compacts the file, so it holds at most about twice the live entries', async () => {
    const record = await open();
    // Rounds of 200 claims at once whose entries expire before the next round: 4,000 claims, 200 live.
    for (let round = 0; round < 20; round++) {
      const now = NOW + round * 10;
      await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          record.claim(`round-${String(round)}-${String(i)}`, now + 5, now),
        ),
      );
      expect((await fileLines()).length).toBeLessThanOrEqual(2 * record.size + 1024);
    }
    expect(record.size).toBe(200);
    const reopened = await open(NOW + 190);
    expect(reopened.size).toBe(200);
    expect(await reopened.claim('round-19-0', NOW + 999, NOW + 190)).toBe('replay');
  });

  it('throws when the state directory cannot be made, at open (so the daemon does not start)', async () => {
    // A regular file where the directory should be: unwritable even for root.
    await writeFile(join(dir.path(), 'occupied'), 'not a directory');
    await expect(
      FileReplayRecord.open(join(dir.path(), 'occupied', 'state'), FILE, NOW),
    ).rejects.toBeInstanceOf(ReplayRecordError);
  });

  it('throws when a claim cannot be written, and keeps no entry for it (the request is refused, a retry may succeed)', async () => {
    const state = join(dir.path(), 'state');
    const record = await FileReplayRecord.open(state, FILE, NOW);
    await rm(state, { recursive: true });
    await writeFile(state, 'not a directory');
    await expect(record.claim('n1', NOW + WINDOW, NOW)).rejects.toBeInstanceOf(ReplayRecordError);
    expect(record.size).toBe(0);
  });
});

describe('claimOrRefuse', () => {
  it('is undefined for a new id, replay for one seen before or signed before the record began, replay-record-full at capacity', async () => {
    const replay = await open(NOW, 1);
    expect(await claimOrRefuse(replay, 'delivery-1', NOW + WINDOW, NOW, NOW)).toBeUndefined();
    expect(await claimOrRefuse(replay, 'delivery-1', NOW + WINDOW, NOW, NOW)).toEqual({
      why: 'replay',
      claim: 'replay',
    });
    expect(await claimOrRefuse(replay, 'delivery-2', NOW + WINDOW, NOW, NOW - 1)).toEqual({
      why: 'replay',
      claim: 'signed-before-start',
    });
    expect(await claimOrRefuse(replay, 'delivery-2', NOW + WINDOW, NOW, NOW)).toEqual({
      why: 'replay-record-full',
    });
  });

  it('is replay-record-unavailable without a record and when the record cannot be written', async () => {
    expect(await claimOrRefuse(undefined, 'delivery-1', NOW + WINDOW, NOW)).toEqual({
      why: 'replay-record-unavailable',
    });
    const replay = await FileReplayRecord.open(join(dir.path(), 'state'), FILE, NOW, 10);
    await rm(replay.dir, { recursive: true });
    await writeFile(replay.dir, 'not a directory');
    expect(await claimOrRefuse(replay, 'delivery-1', NOW + WINDOW, NOW)).toEqual({
      why: 'replay-record-unavailable',
    });
  });
});

describe('ReplayRecords', () => {
  it('keeps each source in its own file with its own capacity: a full GitHub record leaves the trigger claiming', async () => {
    const records = new ReplayRecords({ kind: 'file', dir: dir.path() }, () => NOW, 2);
    const github = await records.open('github');
    const trigger = await records.open('trigger');
    expect(await records.open('github')).toBe(github);
    expect(records.get('gitguardian')).toBeUndefined();
    expect(await github.claim('digest-a', NOW + 3600, NOW)).toBe('claimed');
    expect(await github.claim('digest-b', NOW + 3600, NOW)).toBe('claimed');
    expect(await github.claim('digest-c', NOW + 3600, NOW)).toBe('full');
    expect(await trigger.claim('alice\nnonce-1', NOW + WINDOW, NOW, NOW)).toBe('claimed');
    expect((await stat(join(dir.path(), REPLAY_RECORD_FILES.github))).isFile()).toBe(true);
    expect((await stat(join(dir.path(), REPLAY_RECORD_FILES.trigger))).isFile()).toBe(true);
  });
});
