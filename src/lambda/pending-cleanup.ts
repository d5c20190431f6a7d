// The AWSPENDING label of a rotation that cannot finish: removed, so the next rotation is not
// refused with "A previous rotation isn't complete" (AWS's most common rotation complaint).
import { errorCode } from '../errors.ts';
import type { NativeContext } from './context.ts';

/** Removes AWSPENDING from the token's version; best effort (a failure is audited). */
export async function dropPending(ctx: NativeContext, step: string): Promise<void> {
  try {
    const removed = await ctx.native.removePending(ctx.primary.target.path, ctx.token);
    if (removed === 'moved') ctx.audit.emit('key.native.pending_removed', { step, version: ctx.token });
  } catch (error) {
    ctx.audit.emit('key.native.pending_removed', {
      step,
      version: ctx.token,
      failed: true,
      errorCode: errorCode(error),
    });
  }
}

/** What an operator runs to finish a rotation whose value lives only in AWSPENDING. */
export function finishCommand(ctx: NativeContext): string {
  return `the value is the key's only working copy: finish this rotation with \`aws secretsmanager rotate-secret --secret-id ${ctx.event.SecretId} --client-request-token ${ctx.token}\` (createSecret finds the value and does not roll again; finishSecret makes it AWSCURRENT); do not remove AWSPENDING`;
}
