import { execFile } from 'node:child_process';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { generateIdentity, identityToRecipient } from 'age-encryption';
import { beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import type { SecretRecord } from '../../src/backends/types.ts';
import { EscrowError, escrowFileName, sealToEscrow, type EscrowContent } from '../../src/rotation/escrow.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const run = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, '../..');

// The property that matters is that an operator can open the file with stock `age`, so the
// test decrypts with the real CLI. scripts/test-tools.sh installs it on a fresh machine.
let agePath: string | undefined;
let ageMissing = '';

beforeAll(async () => {
  try {
    const { stdout } = await run('sh', [join(repoRoot, 'scripts/test-tools.sh')], { timeout: 300_000 });
    agePath = /^age=(.+)$/m.exec(stdout)?.[1];
  } catch (error) {
    ageMissing = (error as { stderr?: string }).stderr ?? String(error);
  }
  if (agePath === undefined && process.env.CI === 'true') {
    throw new Error(`the age CLI is required in CI and could not be installed: ${ageMissing}`);
  }
}, 300_000);

function requireAge(skip: (note?: string) => void): string {
  if (agePath === undefined) {
    skip(
      'age CLI missing: run scripts/test-tools.sh, or apt-get install age, or go install filippo.io/age/cmd/...@v1.2.1',
    );
    throw new Error('unreachable');
  }
  return agePath;
}

const workDir = useTempDir('keyroll-escrow-');

function record(value = 'sk_live_escrowed_secret_0123456789'): SecretRecord {
  return {
    secret: new Secret(value),
    keyId: 'key_live_42',
    organizationId: 'org_7',
    rotationId: 'rot-2d1f',
    rotatedAt: '2026-03-01T12:00:00.000Z',
  };
}

async function decryptWithAgeCli(age: string, identity: string, file: string): Promise<EscrowContent> {
  const identityFile = join(workDir.path(), `identity-${Math.random().toString(36).slice(2)}.txt`);
  await writeFile(identityFile, `${identity}\n`, { mode: 0o600 });
  const { stdout } = await run(age, ['-d', '-i', identityFile, file]);
  return JSON.parse(stdout) as EscrowContent;
}

describe('sealToEscrow', () => {
  it('writes a file the age CLI decrypts to the key record and the secret', async ({ skip }) => {
    const age = requireAge(skip);
    const identity = await generateIdentity();
    const directory = join(workDir.path(), 'escrow');

    const sealed = await sealToEscrow({
      record: record(),
      directory,
      recipients: [await identityToRecipient(identity)],
      now: new Date('2026-03-01T12:00:01.000Z'),
    });

    expect(sealed.path).toBe(join(directory, 'key_live_42-rot-2d1f.age'));
    expect(await decryptWithAgeCli(age, identity, sealed.path)).toEqual({
      keyId: 'key_live_42',
      organizationId: 'org_7',
      rotationId: 'rot-2d1f',
      rotatedAt: '2026-03-01T12:00:00.000Z',
      sealedAt: '2026-03-01T12:00:01.000Z',
      apiKey: 'sk_live_escrowed_secret_0123456789',
    });
  });

  it('lets every one of several recipients decrypt the same file', async ({ skip }) => {
    const age = requireAge(skip);
    const first = await generateIdentity();
    const second = await generateIdentity();

    const sealed = await sealToEscrow({
      record: record(),
      directory: workDir.path(),
      recipients: [await identityToRecipient(first), await identityToRecipient(second)],
    });

    expect((await decryptWithAgeCli(age, first, sealed.path)).apiKey).toBe(
      'sk_live_escrowed_secret_0123456789',
    );
    expect((await decryptWithAgeCli(age, second, sealed.path)).apiKey).toBe(
      'sk_live_escrowed_secret_0123456789',
    );
  });

  it('refuses an identity that is not a recipient', async ({ skip }) => {
    const age = requireAge(skip);
    const sealed = await sealToEscrow({
      record: record(),
      directory: workDir.path(),
      recipients: [await identityToRecipient(await generateIdentity())],
    });

    await expect(decryptWithAgeCli(age, await generateIdentity(), sealed.path)).rejects.toThrow(
      /no identity matched/,
    );
  });

  it('creates the directory 0700 and the file 0600, leaving no temporary file', async () => {
    const directory = join(workDir.path(), 'new', 'escrow');
    const sealed = await sealToEscrow({
      record: record(),
      directory,
      recipients: [await identityToRecipient(await generateIdentity())],
    });

    expect((await stat(directory)).mode & 0o777).toBe(0o700);
    expect((await stat(sealed.path)).mode & 0o777).toBe(0o600);
    expect(await readdir(directory)).toEqual(['key_live_42-rot-2d1f.age']);
  });

  it('never puts the plaintext secret, or its base64, on disk', async () => {
    const secret = 'sk_live_escrowed_secret_0123456789';
    const sealed = await sealToEscrow({
      record: record(secret),
      directory: workDir.path(),
      recipients: [await identityToRecipient(await generateIdentity())],
    });

    const bytes = await readFile(sealed.path);
    expect(bytes.subarray(0, 21).toString('latin1')).toBe('age-encryption.org/v1');
    // latin1 reads each byte as one character, so every ASCII spelling would show.
    expectNoSecrets([bytes.toString('latin1')], [secret]);
  });

  it('returns the secret fingerprint so the file can be matched to key.rolled', async () => {
    const input = record();
    const sealed = await sealToEscrow({
      record: input,
      directory: workDir.path(),
      recipients: [await identityToRecipient(await generateIdentity())],
    });

    expect(sealed.fingerprint).toBe(input.secret.fingerprint());
  });

  it('replaces the file when the same rotation is sealed again', async () => {
    const recipients = [await identityToRecipient(await generateIdentity())];
    const first = await sealToEscrow({ record: record(), directory: workDir.path(), recipients });
    const second = await sealToEscrow({ record: record(), directory: workDir.path(), recipients });

    expect(second.path).toBe(first.path);
    expect(await readdir(workDir.path())).toEqual(['key_live_42-rot-2d1f.age']);
  });

  it('rejects a recipient that is not an age public key, writing nothing', async () => {
    const error = await sealToEscrow({
      record: record(),
      directory: join(workDir.path(), 'escrow'),
      recipients: ['ssh-ed25519 AAAA'],
    }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(EscrowError);
    expect(error).toMatchObject({ code: 'KR_ESCROW_RECIPIENT_INVALID', keyId: 'key_live_42' });
    expect((error as Error).message).not.toContain('sk_live_escrowed_secret');
    expect(await readdir(workDir.path())).toEqual([]);
  });

  it('rejects an empty recipient list', async () => {
    await expect(
      sealToEscrow({ record: record(), directory: workDir.path(), recipients: [] }),
    ).rejects.toMatchObject({ code: 'KR_ESCROW_RECIPIENT_INVALID' });
  });

  it('reports a directory it cannot create as KR_ESCROW_WRITE_FAILED', async () => {
    const blocker = join(workDir.path(), 'a-file');
    await writeFile(blocker, 'not a directory');

    const error = await sealToEscrow({
      record: record(),
      directory: join(blocker, 'escrow'),
      recipients: [await identityToRecipient(await generateIdentity())],
    }).catch((e: unknown) => e);

    expect(error).toMatchObject({ code: 'KR_ESCROW_WRITE_FAILED', directory: join(blocker, 'escrow') });
    expect((error as Error).cause).toBeDefined();
  });
});

describe('escrowFileName', () => {
  it('keeps safe ids readable and replaces anything that could leave the directory', () => {
    expect(escrowFileName('key_1.a-b', 'rot-1')).toBe('key_1.a-b-rot-1.age');
    expect(escrowFileName('../etc/passwd', 'r 1')).toBe('.._etc_passwd-r_1.age');
  });
});
