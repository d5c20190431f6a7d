// testSecret: the new value (AWSPENDING, at the token's version) must work against the API, and
// the value consumers read now (AWSCURRENT) must still work too (invariant 10: the previous active
// slot stays alive for a full period). Reads and probes only; safe to repeat.
import { activeSlot } from '../rotation/public/slots.ts';
import { sendAlert } from '../rotation/public/key-alert.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';
import { AWS_CURRENT } from '../backends/public/native.ts';
import type { NativeContext } from './context.ts';
import { NativeRotationError } from './errors.ts';
import { dropPending } from './pending-cleanup.ts';
import { abandonRotation } from './abandon.ts';

export type TestOutcome = 'tested' | 'already-current';

export async function testSecret(ctx: NativeContext): Promise<TestOutcome> {
  const { key, primary, native, token, deps, audit } = ctx;
  const pending = await native.readVersion(primary.target, token);
  if (pending === undefined) {
    const view = await native.describe(primary.target.path);
    if (view.versions[token]?.includes(AWS_CURRENT) === true) {
      audit.emit('key.native.step', { step: 'testSecret', did: 'already-current', version: token });
      return 'already-current';
    }
    await dropPending(ctx, 'testSecret');
    throw new NativeRotationError(
      'KR_NATIVE_NO_PENDING',
      `key ${key.id}: version ${token} of ${primary.target.path} has no value to test; AWSPENDING was removed so the next rotation can start`,
    );
  }
  const verdict = await deps.api.probeSecret(pending.secret, { organizationId: key.organizationId });
  if (verdict !== 'valid') {
    // A refused new value serves nobody: the rotation is given up (AWSCURRENT is untouched).
    const state = await readTrustedState(primary, key, deps.now());
    const standby =
      key.slots !== undefined &&
      state.intent !== undefined &&
      state.intent.keyId !== activeSlot(key.slots, state);
    await abandonRotation(ctx, 'testSecret', standby);
    await sendAlert(deps, key, {
      severity: standby ? 'error' : 'critical',
      summary: `key ${key.id}: the API refuses the new value at version ${token} (testSecret); AWSCURRENT was not moved`,
      rotationId: token,
      step: 'verify',
      errorCode: 'KR_NATIVE_PENDING_REJECTED',
      nextAction: standby
        ? 'consumers keep the working AWSCURRENT; the next rotation rolls the standby again'
        : `run \`keyroll rotate --key ${key.id} --reason recovery\``,
    });
    throw new NativeRotationError(
      'KR_NATIVE_PENDING_REJECTED',
      `key ${key.id}: the API refuses the new value at version ${token}; the rotation was given up`,
    );
  }
  const current = await primary.backend.readSecret(primary.target).catch(() => undefined);
  const currentWorks =
    current === undefined
      ? false
      : await deps.api.probeSecret(current.secret, { organizationId: key.organizationId }).then(
          (answer) => answer === 'valid',
          () => false,
        );
  if (!currentWorks) {
    // finishSecret heals it by making the working new value current: reported, not a failed step.
    audit.emit('key.verify.failed', {
      step: 'verify',
      failures: [{ check: 'previous-active', errorCode: 'KR_VERIFY_PREVIOUS_DEAD' }],
    });
    await sendAlert(deps, key, {
      severity: 'error',
      summary: `key ${key.id}: AWSCURRENT of ${primary.target.path} no longer works (testSecret); consumers fail until finishSecret makes the new value current`,
      rotationId: token,
      step: 'verify',
      errorCode: 'KR_VERIFY_PREVIOUS_DEAD',
      nextAction: 'the rotation goes on; check who rolled the active slot outside keyroll',
    });
  }
  audit.emit('key.native.step', { step: 'testSecret', did: 'tested', version: token, currentWorks });
  return 'tested';
}
