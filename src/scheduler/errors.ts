import type { ErrorCode } from '../error-codes.ts';
import { KeyrollError } from '../errors.ts';

/**
 * A run the launcher started for one key (Launcher.runOne) gave no outcome for it: the run stopped
 * unexpectedly (KR_LAUNCHER_NO_OUTCOME; the run's own `run.aborted` and alert say why), or the
 * launcher itself threw (KR_LAUNCHER_FAILED). The caller reports it; no outcome is made up.
 */
export class LauncherError extends KeyrollError {
  override name = 'LauncherError';
  readonly keyId: string;
  constructor(
    code: Extract<ErrorCode, 'KR_LAUNCHER_FAILED' | 'KR_LAUNCHER_NO_OUTCOME'>,
    keyId: string,
    message: string,
    cause?: unknown,
  ) {
    super(code, message, { cause });
    this.keyId = keyId;
  }
}
