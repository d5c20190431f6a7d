// What an AWS target path may be: a secret name or a full secret ARN. Checked before any call,
// so a bad policy entry fails with KR_BACKEND_INVALID_TARGET instead of an AWS validation error.
import { BackendError } from '../errors.ts';
import type { BackendOperation } from '../errors.ts';

// arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters AWS appends>
const SECRET_ARN = /^arn:[^:]+:secretsmanager:[^:]*:[^:]*:secret:(.+)-[A-Za-z0-9]{6}$/;
// Secrets Manager names: 1–512 of ASCII letters, digits and / _ + = . @ -
const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
/** Room left in a name for the lock companion's suffix. */
const MAX_NAME_FOR_LOCK = 512 - '.keyroll-lock'.length;

export function isSecretArn(path: string): boolean {
  return SECRET_ARN.test(path);
}

/** Whether keyroll may create the secret at `path`: the backend allows it and the path is a name (no ARN). */
export function mayCreateSecret(createIfMissing: boolean, path: string): boolean {
  return createIfMissing && !isSecretArn(path);
}

/** The secret's name: the path itself, or the name inside a full ARN. */
export function secretNameOf(path: string): string {
  return SECRET_ARN.exec(path)?.[1] ?? path;
}

export function checkTargetPath(
  path: string,
  context: { backendName: string; operation: BackendOperation },
): void {
  const name = secretNameOf(path);
  let problem: string | undefined;
  if (!SECRET_NAME.test(name))
    problem = 'is not a Secrets Manager name (1-512 of letters, digits and /_+=.@-) or secret ARN';
  else if (name.length > MAX_NAME_FOR_LOCK)
    problem = `is longer than ${String(MAX_NAME_FOR_LOCK)} characters (keyroll needs room for its lock secret)`;
  if (problem === undefined) return;
  throw new BackendError(
    'KR_BACKEND_INVALID_TARGET',
    `aws target ${JSON.stringify(path.slice(0, 600))} ${problem}`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: context.operation,
      path,
    },
  );
}
