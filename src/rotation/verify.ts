// The verify step: read the secret back from every destination that took it and compare
// digests, then (unless disabled) call the API with the new key. Runs only after the store.
import type { Secret } from '../audit/public/secret.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { StoredCopy } from './store.ts';
import type { RotationDeps } from './types.ts';

export interface VerifyFailure {
  check: 'read-back' | 'api';
  backend?: string;
  path?: string;
  errorCode: string;
}

export interface VerifyReport {
  failures: VerifyFailure[];
  /** False when a read-back did not match: the store itself is in doubt. */
  readBackOk: boolean;
  apiChecked: boolean;
  /** The API answered 401 to the new secret: the old one is dead and the new one refused. */
  apiRejected: boolean;
}

export async function verifyStored(
  key: KeyPolicy,
  secret: Secret,
  copies: readonly StoredCopy[],
  deps: RotationDeps,
): Promise<VerifyReport> {
  const report: VerifyReport = { failures: [], readBackOk: true, apiChecked: false, apiRejected: false };
  if (key.verify.readBack) {
    for (const copy of copies) {
      const { backendName, backend, target } = copy.destination;
      try {
        const stored = await backend.readSecret(target);
        if (stored?.secret.digest() !== secret.digest()) {
          report.failures.push({
            check: 'read-back',
            backend: backendName,
            path: target.path,
            errorCode: 'KR_VERIFY_DIGEST_MISMATCH',
          });
          report.readBackOk = false;
        }
      } catch (error) {
        report.failures.push({
          check: 'read-back',
          backend: backendName,
          path: target.path,
          errorCode: errorCode(error),
        });
        report.readBackOk = false;
      }
    }
  }
  if (key.verify.apiCall) {
    report.apiChecked = true;
    try {
      const verdict = await deps.api.probeSecret(secret, { organizationId: key.organizationId });
      if (verdict !== 'valid') {
        report.failures.push({ check: 'api', errorCode: 'KR_VERIFY_API_REJECTED' });
        report.apiRejected = true;
      }
    } catch (error) {
      report.failures.push({ check: 'api', errorCode: errorCode(error) });
    }
  }
  return report;
}
