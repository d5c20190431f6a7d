// The file backend's bookkeeping (the `<file>.keyroll.json` sidecar) around the value: a sidecar
// that cannot be updated never turns a durable write into a failed one, and concurrent sidecar
// changes never drop each other's fields (an intent marker, the last failure).
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { FailureRecord, Intent, StoreTarget, ValueShape } from '../../../src/backends/types.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { makeRecord } from '../contract.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

const RAW: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };
const WITH_ROTATION: ValueShape = { format: 'json', secretField: 'apiKey', fields: ['rotationId'] };

describe('file backend bookkeeping', () => {
  const directory = useTempDir('keyroll-file-bookkeeping-');
  let base: string;
  let backend: FileBackend;
  const target = (path: string, shape: ValueShape = RAW): StoreTarget => ({ path, shape });
  const intent = (rotationId: string): Intent => ({
    rotationId,
    keyId: 'k',
    owner: 'holder',
    startedAt: '2030-01-01T00:00:00.000Z',
  });
  const failure = (rotationId: string): FailureRecord => ({
    rotationId,
    step: 'lock',
    errorCode: 'KR_BACKEND_UNAVAILABLE',
    at: '2030-01-01T00:00:00.000Z',
  });

  beforeEach(async () => {
    base = join(directory.path(), 'base');
    await mkdir(base, { recursive: true });
    backend = new FileBackend('files', { kind: 'file', directory: base });
  });

  describe('intent marker', () => {
    it("keeps a leak's reason and stored fingerprint, and reads a sidecar an older keyroll wrote (no reason) as before", async () => {
      const t = target('m');
      const leak = { ...intent('r-leak'), reason: 'leak', storedFingerprint: '0123456789ab' };
      await backend.setIntent(t, leak);
      expect((await backend.readState(t)).intent).toEqual(leak);
      const sidecar = JSON.parse(await readFile(join(base, 'm.keyroll.json'), 'utf8')) as Record<
        string,
        unknown
      >;
      await writeFile(join(base, 'm.keyroll.json'), JSON.stringify({ ...sidecar, intent: intent('r-old') }));
      expect((await backend.readState(t)).intent).toEqual(intent('r-old'));
    });
  });

  describe('a sidecar update that fails after the value is durable', () => {
    it('does not fail the write: the result names the bookkeeping problem and the value is stored', async () => {
      await writeFile(join(base, 'k.keyroll.json'), '{not json');
      const record = makeRecord();
      const written = await backend.writeSecret(target('k'), record);
      expect(written).toMatchObject({
        alreadyApplied: false,
        bookkeepingError: expect.stringContaining('k.keyroll.json') as unknown,
      });
      expectNoSecrets([written.bookkeepingError ?? ''], [record.secret.reveal()]);
      expect(await readFile(join(base, 'k'), 'utf8')).toBe(record.secret.reveal());
    });

    it('leaves readSecret working with the version the write returned', async () => {
      await writeFile(join(base, 'k.keyroll.json'), '{not json');
      const record = makeRecord();
      const written = await backend.writeSecret(target('k'), record);
      const stored = await backend.readSecret(target('k'));
      expect(stored?.secret.equals(record.secret)).toBe(true);
      expect(stored?.version).toBe(written.version);
    });

    it('still names the rotation: from the stored JSON value, or from what this process wrote', async () => {
      await writeFile(join(base, 'j.keyroll.json'), '{not json');
      await writeFile(join(base, 'r.keyroll.json'), '{not json');
      const json = makeRecord();
      const raw = makeRecord();
      await backend.writeSecret(target('j', WITH_ROTATION), json);
      await backend.writeSecret(target('r'), raw);
      expect((await backend.readSecret(target('j', WITH_ROTATION)))?.rotationId).toBe(json.rotationId);
      expect((await backend.readSecret(target('r')))?.rotationId).toBe(raw.rotationId);
      // Another process has only the value: a JSON value still says which rotation wrote it.
      const other = new FileBackend('files', { kind: 'file', directory: base });
      expect((await other.readSecret(target('j', WITH_ROTATION)))?.rotationId).toBe(json.rotationId);
    });

    it('records the write with the next sidecar change, once the sidecar can be written again', async () => {
      const sidecar = join(base, 'k.keyroll.json');
      await mkdir(sidecar);
      const record = makeRecord();
      const written = await backend.writeSecret(target('k'), record);
      await rm(sidecar, { recursive: true });
      await backend.recordRotation(target('k'), {
        rotationId: record.rotationId,
        rotatedAt: record.rotatedAt,
        version: written.version,
      });
      expect(await backend.readSecret(target('k'))).toMatchObject({
        version: '1',
        rotationId: record.rotationId,
      });
      expect(await backend.readState(target('k'))).toMatchObject({ lastRotationId: record.rotationId });
    });

    it('does not record it when the value was replaced meanwhile', async () => {
      const sidecar = join(base, 'k.keyroll.json');
      await mkdir(sidecar);
      await backend.writeSecret(target('k'), makeRecord());
      await rm(sidecar, { recursive: true });
      await writeFile(join(base, 'k'), 'sk_replaced_by_someone_else_0001');
      await backend.setIntent(target('k'), intent('r1'));
      expect((await backend.readSecret(target('k')))?.version).toMatch(/^mtime-/);
    });
  });

  describe('concurrent sidecar changes', () => {
    it("keep the lock holder's intent when another runner records a failure at the same time", async () => {
      const holder = new FileBackend('files', { kind: 'file', directory: base });
      const bystander = new FileBackend('files', { kind: 'file', directory: base });
      for (let round = 0; round < 20; round++) {
        const t = target(`race/k-${String(round)}`);
        await holder.writeSecret(t, makeRecord());
        await Promise.all([
          holder.setIntent(t, intent(`rot-${String(round)}`)),
          bystander.recordFailure(t, failure('rot-other')),
        ]);
        const state = await holder.readState(t);
        expect(state.intent?.rotationId, `round ${String(round)}`).toBe(`rot-${String(round)}`);
        expect(state.lastFailure?.rotationId, `round ${String(round)}`).toBe('rot-other');
      }
      expect(
        (await readdir(join(base, 'race'))).filter((f) => f.endsWith('.guard') || f.endsWith('.tmp')),
      ).toEqual([]);
    });

    it('clears an intent only when it still names the rotation, under the same guard', async () => {
      const t = target('k');
      await backend.setIntent(t, intent('r1'));
      await Promise.all([backend.clearIntent(t, 'r1'), backend.recordFailure(t, failure('r1'))]);
      expect(await backend.readState(t)).toMatchObject({ lastFailure: { rotationId: 'r1' } });
      expect((await backend.readState(t)).intent).toBeUndefined();
    });

    it('removes a sidecar guard left behind by a crash once it is old', async () => {
      const guard = join(base, 'k.keyroll.json.guard');
      await writeFile(guard, '');
      const old = new Date(Date.now() - 60_000);
      await utimes(guard, old, old);
      await backend.setIntent(target('k'), intent('r1'));
      expect((await backend.readState(target('k'))).intent?.rotationId).toBe('r1');
      expect(await readdir(base)).not.toContain('k.keyroll.json.guard');
    });

    it('refuses the guard file itself as a target', async () => {
      await expect(backend.preflight(target('k.keyroll.json.guard'))).rejects.toMatchObject({
        code: 'KR_BACKEND_INVALID_TARGET',
      });
    });
  });
});
