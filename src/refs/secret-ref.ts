// Credentials in the policy are references, never values: `env:NAME` reads an environment
// variable, `file:/path` reads a file (re-read on every resolve, so a Kubernetes-mounted
// Secret that rotates is picked up). Resolved values are wrapped in Secret at once, pinned: a
// referenced value is a long-lived credential, blanked however many rotations come after.
// It stands below every folder that reads a reference (api, backends, alerts, policy, leaks,
// metrics), so none of them imports policy/ for it (docs/layout.md).
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { Secret } from '../audit/public/secret.ts';
import { KeyrollError } from '../errors.ts';

export const SecretRef = z.string().regex(/^(env:[A-Za-z_][A-Za-z0-9_]*|file:\/.+)$/, {
  message: 'must be a reference like env:NAME or file:/absolute/path, never a literal secret',
});
export type SecretRef = z.infer<typeof SecretRef>;

export class RefError extends KeyrollError {
  override name = 'RefError';
  readonly ref: string;
  constructor(ref: string, message: string, cause?: unknown) {
    super('KR_REF_UNRESOLVED', message, { cause });
    this.ref = ref;
  }
}

/** Reads the value a reference points at. Trailing newlines of files are dropped. */
export async function resolveRef(ref: string, env: NodeJS.ProcessEnv = process.env): Promise<Secret> {
  if (ref.startsWith('env:')) {
    const name = ref.slice(4);
    const value = env[name];
    if (value === undefined || value === '') {
      throw new RefError(ref, `environment variable ${name} (from ${ref}) is not set`);
    }
    return new Secret(value).pinned();
  }
  if (ref.startsWith('file:')) {
    const path = ref.slice(5);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw new RefError(
        ref,
        `cannot read ${path} (from ${ref}): ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        error,
      );
    }
    const value = text.replace(/\r?\n$/, '');
    if (value === '') throw new RefError(ref, `${path} (from ${ref}) is empty`);
    return new Secret(value).pinned();
  }
  throw new RefError(ref, `${ref} is not a reference (expected env:NAME or file:/path)`);
}
