import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../../src/backends/errors.ts';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { StoreTarget, ValueShape } from '../../../src/backends/types.ts';
import { createTempDir, useTempDir } from '../../support/temp-dir.ts';
import { createTestClock, describeBackendContract, makeRecord } from '../contract.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

const RAW: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };
const JSON_SHAPE: ValueShape = {
  format: 'json',
  secretField: 'apiKey',
  fields: ['keyId', 'organizationId', 'rotatedAt', 'rotationId'],
};

describeBackendContract('file', async () => {
  const directory = await createTempDir('keyroll-file-contract-');
  const clock = createTestClock();
  let n = 0;
  const open = (): FileBackend =>
    new FileBackend(
      'files',
      { kind: 'file', directory: join(directory.path, 'secrets') },
      { now: clock.now },
    );
  return {
    backend: open(),
    clock,
    otherRunner: () => Promise.resolve(open()),
    newTarget: (shape) => {
      n += 1;
      return { path: `keys/key-${String(n)}`, shape: { ...RAW, ...shape } };
    },
    failingTarget: () => ({ path: '../outside', shape: RAW }),
    cleanup: () => directory.remove(),
  };
});

describe('file backend', () => {
  const directory = useTempDir('keyroll-file-');
  let backend: FileBackend;
  const target = (path: string, shape: ValueShape = RAW): StoreTarget => ({ path, shape });

  beforeEach(() => {
    backend = new FileBackend('files', { kind: 'file', directory: join(directory.path(), 'base') });
  });

  it('writes a raw value as the bare secret with mode 0600 in a 0700 directory', async () => {
    const record = makeRecord();
    await backend.writeSecret(target('app/key'), record);
    const file = join(directory.path(), 'base', 'app/key');
    expect(await readFile(file, 'utf8')).toBe(record.secret.reveal());
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(directory.path(), 'base'))).mode & 0o777).toBe(0o700);
  });

  it('writes a json value with the secret and the chosen fields', async () => {
    const record = makeRecord({
      keyId: 'key_1',
      organizationId: 'org_1',
      rotatedAt: '2030-02-03T04:05:06.000Z',
    });
    await backend.writeSecret(target('app.json', JSON_SHAPE), record);
    const stored = JSON.parse(await readFile(join(directory.path(), 'base', 'app.json'), 'utf8')) as unknown;
    expect(stored).toEqual({
      apiKey: record.secret.reveal(),
      keyId: 'key_1',
      organizationId: 'org_1',
      rotatedAt: '2030-02-03T04:05:06.000Z',
      rotationId: record.rotationId,
    });
  });

  it('leaves no temp files behind and keeps the secret out of the sidecar', async () => {
    const record = makeRecord();
    await backend.writeSecret(target('k'), record);
    await backend.setIntent(target('k'), {
      rotationId: 'r',
      keyId: 'k',
      owner: 'o',
      startedAt: '2030-01-01T00:00:00.000Z',
    });
    const files = await readdir(join(directory.path(), 'base'));
    // k.keyroll.current is a second name (hard link) of the value itself, not a copy: readPrevious.
    expect(files.sort()).toEqual(['k', 'k.keyroll.current', 'k.keyroll.json']);
    expect((await stat(join(directory.path(), 'base', 'k.keyroll.current'))).ino).toBe(
      (await stat(join(directory.path(), 'base', 'k'))).ino,
    );
    const sidecar = await readFile(join(directory.path(), 'base', 'k.keyroll.json'), 'utf8');
    expectNoSecrets([sidecar], [record.secret.reveal()]);
    expect((await stat(join(directory.path(), 'base', 'k.keyroll.json'))).mode & 0o777).toBe(0o600);
  });

  it.each([
    ['../escape'],
    ['/etc/passwd'],
    ['a/../../escape'],
    [''],
    ['k.keyroll.json'],
    ['k.keyroll.lock'],
    ['k.keyroll.current'],
    ['k.keyroll.previous'],
  ])('refuses the target path %j before touching any file', async (path) => {
    await expect(backend.preflight(target(path))).rejects.toMatchObject({
      code: 'KR_BACKEND_INVALID_TARGET',
      operation: 'preflight',
    });
  });

  it('fails preflight when the path runs through a regular file', async () => {
    await backend.writeSecret(target('plain'), makeRecord());
    const error: unknown = await backend.preflight(target('plain/inner')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ kind: 'file', backend: 'files', path: 'plain/inner', retryable: false });
  });

  it('fails preflight when the target is a directory', async () => {
    await backend.writeSecret(target('dir/inner'), makeRecord());
    await expect(backend.preflight(target('dir'))).rejects.toMatchObject({
      code: 'KR_BACKEND_INVALID_TARGET',
    });
  });

  it('reports a corrupt sidecar as an invalid response instead of overwriting it blindly', async () => {
    await backend.writeSecret(target('k'), makeRecord());
    await writeFile(join(directory.path(), 'base', 'k.keyroll.json'), '{not json');
    await expect(backend.readState(target('k'))).rejects.toMatchObject({
      code: 'KR_BACKEND_INVALID_RESPONSE',
      operation: 'state',
    });
  });

  it('answers a retry whose first attempt landed without bookkeeping as already applied, and records it', async () => {
    const record = makeRecord();
    const sidecar = join(directory.path(), 'base', 'k.keyroll.json');
    // The first attempt's sidecar update fails (a directory stands where the sidecar goes).
    await mkdir(sidecar, { recursive: true });
    const first = await backend.writeSecret(target('k'), record);
    expect(first).toMatchObject({
      version: expect.stringMatching(/^mtime-/) as unknown,
      alreadyApplied: false,
    });
    await rm(sidecar, { recursive: true });
    const retry = await backend.writeSecret(target('k'), record);
    expect(retry).toEqual({ version: '1', alreadyApplied: true });
    expect(await backend.readSecret(target('k'))).toMatchObject({
      version: '1',
      rotationId: record.rotationId,
    });
  });

  it('gives a hand-edited value an mtime version instead of claiming it as ours', async () => {
    await backend.writeSecret(target('k'), makeRecord());
    await writeFile(join(directory.path(), 'base', 'k'), 'sk_edited_by_hand_000000');
    const stored = await backend.readSecret(target('k'));
    expect(stored?.version).toMatch(/^mtime-/);
    expect(stored?.rotationId).toBeUndefined();
  });

  it('reads a json target whose file is not json as missing', async () => {
    await writeFile(join(await makeBaseDirectory(directory.path()), 'k.json'), 'not json at all');
    expect(await backend.readSecret(target('k.json', JSON_SHAPE))).toBeUndefined();
  });

  it('takes over a lock file it cannot parse, as one expired long ago', async () => {
    await makeBaseDirectory(directory.path());
    await writeFile(join(directory.path(), 'base', 'k.keyroll.lock'), '');
    const outcome = await backend.acquireLock(target('k'), { owner: 'a', rotationId: 'r', ttlMs: 1000 });
    expect(outcome).toMatchObject({ acquired: true, lock: { tookOver: true } });
  });

  it('lets only one of many racers take over a stale lock', async () => {
    const clock = createTestClock();
    const clocked = new FileBackend(
      'files',
      { kind: 'file', directory: join(directory.path(), 'base') },
      { now: clock.now },
    );
    await clocked.acquireLock(target('k'), { owner: 'old', rotationId: 'r0', ttlMs: 1000 });
    clock.advance(5000);
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        clocked.acquireLock(target('k'), {
          owner: `racer-${String(i)}`,
          rotationId: `r${String(i)}`,
          ttlMs: 60_000,
        }),
      ),
    );
    expect(outcomes.filter((o) => o.acquired)).toHaveLength(1);
    const files = await readdir(join(directory.path(), 'base'));
    expect(files.filter((f) => f.endsWith('.tmp') || f.endsWith('.takeover'))).toEqual([]);
  });
});

async function makeBaseDirectory(directory: string): Promise<string> {
  const base = join(directory, 'base');
  await mkdir(base, { recursive: true });
  return base;
}
