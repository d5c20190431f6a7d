import type { ErrorCode } from '../error-codes.ts';
import { KeyrollError } from '../errors.ts';
import type { RotationStep } from './types.ts';

/** A key's rotation failed at a step; the run goes on with other keys. */
export class RotationStepError extends KeyrollError {
  override name = 'RotationStepError';
  readonly step: RotationStep;
  readonly keyId: string;
  constructor(step: RotationStep, keyId: string, code: ErrorCode, message: string, cause?: unknown) {
    super(code, message, { cause });
    this.step = step;
    this.keyId = keyId;
  }
}

/** The whole run must stop before more rolls (keyroll's own credential refused, shutdown). */
export class RunAbortedError extends KeyrollError {
  override name = 'RunAbortedError';
  readonly reason: 'credential-refused' | 'shutdown';
  constructor(reason: 'credential-refused' | 'shutdown', message: string, cause?: unknown) {
    super(reason === 'shutdown' ? 'KR_RUN_SHUTDOWN' : 'KR_RUN_CREDENTIAL_REFUSED', message, { cause });
    this.reason = reason;
  }
}
