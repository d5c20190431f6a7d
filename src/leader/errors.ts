// Errors of the leader election (src/leader/). None of them stops the daemon: a replica that cannot
// read or write the Lease is simply not the leader, and says so in the audit trail.
import { KeyrollError } from '../errors.ts';

export type LeaderErrorCode =
  /** Another replica wrote the Lease between our read and our write (409): we lost the race. */
  | 'KR_LEADER_CONFLICT'
  /** The API server refused our identity (401/403): the Role does not grant get/update on the Lease. */
  | 'KR_LEADER_FORBIDDEN'
  /** The API server answered an error status other than 401/403/409. */
  | 'KR_LEADER_API_ERROR'
  /** No answer within the request's deadline, or no connection at all. */
  | 'KR_LEADER_UNREACHABLE'
  /** The leader could not renew within the renew deadline (or saw another holder): it stops starting work. */
  | 'KR_LEADER_LOST';

export class LeaderError extends KeyrollError {
  override name = 'LeaderError';
  declare readonly code: LeaderErrorCode;
  readonly status: number | undefined;

  constructor(code: LeaderErrorCode, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(code, message, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      retryable: code !== 'KR_LEADER_FORBIDDEN',
    });
    this.status = options.status;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), ...(this.status === undefined ? {} : { status: this.status }) };
  }
}
