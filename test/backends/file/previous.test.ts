// The file backend's slot and probe bookkeeping beyond the contract (invariant 10): the value the
// latest write replaced, kept as hard links beside the value (`<file>.keyroll.current` and
// `<file>.keyroll.previous`), and the sidecar fields lastKeyId and lastProbe, including sidecars
// written by keyrolls that did not know them.
import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { Intent, StoreTarget, ValueShape } from '../../../src/backends/types.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { makeRecord } from '../contract.ts';

const RAW: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };

describe('file backend: the replaced value and slot bookkeeping', () => {
  const directory = useTempDir('keyroll-file-previous-');
  let base: string;
  let backend: FileBackend;
  const t: StoreTarget = { path: 'apps/key', shape: RAW };
  const file = (suffix = ''): string => join(base, `apps/key${suffix}`);
  const intent = (rotationId: string): Intent => ({
    rotationId,
    keyId: 'key_slot_b',
    owner: 'o',
    startedAt: '2030-01-01T00:00:00.000Z',
  });

  beforeEach(async () => {
    base = join(directory.path(), 'base');
    await mkdir(join(base, 'apps'), { recursive: true });
    backend = new FileBackend('files', { kind: 'file', directory: base });
  });

  it('keeps a value written by hand (or by an older keyroll) once a rotation marked its intent before replacing it', async () => {
    await writeFile(file(), 'sk_live_written_by_hand_before_slots_0001', { mode: 0o644 });
    await backend.setIntent(t, intent('r1'));
    const record = makeRecord();
    await backend.writeSecret(t, record);
    expect((await backend.readPrevious(t))?.secret.reveal()).toBe(
      'sk_live_written_by_hand_before_slots_0001',
    );
    expect((await backend.readSecret(t))?.secret.equals(record.secret)).toBe(true);
  });

  it('keeps the replaced value with mode 0600, whatever mode the hand-made value had', async () => {
    await writeFile(file(), 'sk_live_world_readable_by_mistake_0002');
    await chmod(file(), 0o644);
    await backend.setIntent(t, intent('r1'));
    await backend.writeSecret(t, makeRecord());
    expect((await stat(file('.keyroll.previous'))).mode & 0o777).toBe(0o600);
    expect((await stat(file())).mode & 0o777).toBe(0o600);
  });

  it('keeps no copy of the secret: the kept names are hard links of the value inodes', async () => {
    const first = makeRecord();
    await backend.writeSecret(t, first);
    const firstInode = (await stat(file())).ino;
    await backend.writeSecret(t, makeRecord());
    expect((await stat(file('.keyroll.previous'))).ino).toBe(firstInode);
    expect((await stat(file('.keyroll.current'))).ino).toBe((await stat(file())).ino);
  });

  it('names the replaced value when a run was killed between the rename of the new value and keeping the old one', async () => {
    const first = makeRecord();
    await backend.writeSecret(t, first);
    // What a write killed right after its rename leaves: a new inode at the value's name, the
    // `current` name still on the replaced one.
    await writeFile(join(base, 'apps/.key.killed.tmp'), 'sk_live_rolled_then_killed_0003', { mode: 0o600 });
    await rename(join(base, 'apps/.key.killed.tmp'), file());
    expect((await backend.readPrevious(t))?.secret.equals(first.secret)).toBe(true);
    // The next rotation's intent step moves it into place; its write keeps the killed run's value.
    await backend.setIntent(t, intent('r2'));
    expect((await backend.readPrevious(t))?.secret.equals(first.secret)).toBe(true);
    await backend.writeSecret(t, makeRecord());
    expect((await backend.readPrevious(t))?.secret.reveal()).toBe('sk_live_rolled_then_killed_0003');
  });

  it('answers undefined while the first write has replaced nothing', async () => {
    expect(await backend.readPrevious(t)).toBeUndefined();
    await backend.writeSecret(t, makeRecord());
    expect(await backend.readPrevious(t)).toBeUndefined();
  });

  it('reads a json previous value with the fields it was written with', async () => {
    const shaped: StoreTarget = {
      path: 'apps/key',
      shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'rotationId'] },
    };
    const first = makeRecord({ keyId: 'key_slot_a' });
    await backend.writeSecret(shaped, first);
    await backend.writeSecret(shaped, makeRecord({ keyId: 'key_slot_b' }));
    const previous = await backend.readPrevious(shaped);
    expect(previous?.rotationId).toBe(first.rotationId);
    expect(JSON.parse(await readFile(file('.keyroll.previous'), 'utf8'))).toMatchObject({
      keyId: 'key_slot_a',
    });
  });

  it('reads a sidecar of an older keyroll (no lastKeyId, no lastProbe) and adds both to it', async () => {
    const old = {
      version: 3,
      lastRotatedAt: '2029-12-01T00:00:00.000Z',
      lastRotationId: 'rot-old',
      lastRotationVersion: '3',
    };
    await writeFile(file('.keyroll.json'), JSON.stringify(old));
    const before = await backend.readState(t);
    expect(before).toMatchObject({ lastRotationId: 'rot-old' });
    expect(before.lastKeyId).toBeUndefined();
    expect(before.lastProbe).toBeUndefined();
    await backend.recordProbe(t, { at: '2030-01-01T00:00:00.000Z', result: 'works' });
    await backend.recordRotation(t, {
      rotationId: 'rot-new',
      rotatedAt: '2030-01-02T00:00:00.000Z',
      version: '4',
      keyId: 'key_slot_a',
    });
    expect(await backend.readState(t)).toMatchObject({
      lastRotationId: 'rot-new',
      lastKeyId: 'key_slot_a',
      lastProbe: { at: '2030-01-01T00:00:00.000Z', result: 'works' },
    });
  });

  it('drops lastKeyId when a later rotation records none (it names the key of the last rotation only)', async () => {
    await backend.recordRotation(t, {
      rotationId: 'rot-1',
      rotatedAt: '2030-01-01T00:00:00.000Z',
      version: '1',
      keyId: 'key_slot_a',
    });
    await backend.recordRotation(t, {
      rotationId: 'rot-2',
      rotatedAt: '2030-01-02T00:00:00.000Z',
      version: '2',
    });
    expect((await backend.readState(t)).lastKeyId).toBeUndefined();
  });

  it('keeps the intent marker and the last failure when a probe is recorded', async () => {
    await backend.setIntent(t, intent('r1'));
    await backend.recordFailure(t, {
      rotationId: 'r0',
      step: 'verify',
      errorCode: 'KR_VERIFY_FAILED',
      at: '2030-01-01T00:00:00.000Z',
    });
    await backend.recordProbe(t, { at: '2030-01-01T03:00:00.000Z', result: 'dead' });
    const state = await backend.readState(t);
    expect(state.intent?.rotationId).toBe('r1');
    expect(state.lastFailure?.rotationId).toBe('r0');
    expect(state.lastProbe).toEqual({ at: '2030-01-01T03:00:00.000Z', result: 'dead' });
  });
});
