// The last resort of invariant 4: when no destination takes a freshly rolled secret, it is
// sealed to the operators' age public keys in a file only they can open (`age -d -i <identity>`),
// so a human can still put the one working credential where it belongs. The file holds the
// secret encrypted and nothing else readable; the plaintext never touches the disk.
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Encrypter } from 'age-encryption';
import type { SecretRecord } from '../backends/public/types.ts';
import { KeyrollError } from '../errors.ts';

export type EscrowErrorCode =
  /** A recipient is not an age public key the encrypter accepts. */
  | 'KR_ESCROW_RECIPIENT_INVALID'
  /** The directory or file could not be created or written. */
  | 'KR_ESCROW_WRITE_FAILED';

export class EscrowError extends KeyrollError {
  override name = 'EscrowError';
  declare readonly code: EscrowErrorCode;
  readonly directory: string;
  readonly keyId: string;

  constructor(
    code: EscrowErrorCode,
    message: string,
    context: { directory: string; keyId: string; cause?: unknown },
  ) {
    super(code, message, { cause: context.cause });
    this.directory = context.directory;
    this.keyId = context.keyId;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), directory: this.directory, keyId: this.keyId };
  }
}

export interface EscrowInput {
  record: SecretRecord;
  directory: string;
  /** age recipients (`age1…`); every one of them can decrypt the file. */
  recipients: string[];
  /** When the file was sealed (recorded inside it as `sealedAt`). */
  now?: Date;
}

export interface EscrowResult {
  path: string;
  /** Fingerprint of the sealed secret (safe to log), to match the file against `key.rolled`. */
  fingerprint: string;
}

/** The decrypted content of an escrow file. */
export interface EscrowContent {
  keyId: string;
  organizationId: string;
  rotationId: string;
  rotatedAt: string;
  sealedAt: string;
  apiKey: string;
}

/** File name for a key's escrow: ids are kept readable, anything that is not a safe file-name character becomes `_`. */
export function escrowFileName(keyId: string, rotationId: string): string {
  const safe = (text: string): string => text.replace(/[^A-Za-z0-9._-]/g, '_');
  return `${safe(keyId)}-${safe(rotationId)}.age`;
}

async function encryptToRecipients(
  content: EscrowContent,
  recipients: readonly string[],
  context: { directory: string; keyId: string },
): Promise<Uint8Array> {
  if (recipients.length === 0) {
    throw new EscrowError('KR_ESCROW_RECIPIENT_INVALID', 'escrow needs at least one age recipient', context);
  }
  const encrypter = new Encrypter();
  for (const recipient of recipients) {
    try {
      encrypter.addRecipient(recipient);
    } catch (error) {
      // The recipient is a public key, safe to name; it tells the operator which entry to fix.
      throw new EscrowError(
        'KR_ESCROW_RECIPIENT_INVALID',
        `escrow recipient ${recipient} is not an age public key`,
        { ...context, cause: error },
      );
    }
  }
  const plaintext = new TextEncoder().encode(JSON.stringify(content));
  try {
    // Binary age format: what `age -d` reads by default, and the smallest file.
    return await encrypter.encrypt(plaintext);
  } finally {
    plaintext.fill(0);
  }
}

/** Writes `bytes` to `path` atomically (temp file 0600, fsync, rename, fsync of the directory). */
async function writeFileAtomically(directory: string, path: string, bytes: Uint8Array): Promise<void> {
  const temporary = join(directory, `.${randomBytes(6).toString('hex')}.age.tmp`);
  try {
    const file = await open(temporary, 'wx', 0o600);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  // The rename is durable only once the directory entry is on disk.
  const dir = await open(directory, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/**
 * Seals `record` into `<directory>/<keyId>-<rotationId>.age`, encrypted to every recipient.
 * Sealing the same rotation again replaces the file with an equivalent one.
 */
export async function sealToEscrow(input: EscrowInput): Promise<EscrowResult> {
  const { record, directory } = input;
  const context = { directory, keyId: record.keyId };
  const content: EscrowContent = {
    keyId: record.keyId,
    organizationId: record.organizationId,
    rotationId: record.rotationId,
    rotatedAt: record.rotatedAt,
    sealedAt: (input.now ?? new Date()).toISOString(),
    // The one reveal of this module: the value goes into the ciphertext only.
    apiKey: record.secret.reveal(),
  };
  const sealed = await encryptToRecipients(content, input.recipients, context);
  const path = join(directory, escrowFileName(record.keyId, record.rotationId));
  try {
    // 0700: the directory lists which keys were escrowed; only keyroll's user may read it.
    await mkdir(directory, { recursive: true, mode: 0o700 });
    await writeFileAtomically(directory, path, sealed);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    throw new EscrowError('KR_ESCROW_WRITE_FAILED', `cannot write the escrow file in ${directory}: ${code}`, {
      ...context,
      cause: error,
    });
  }
  return { path, fingerprint: record.secret.fingerprint() };
}
