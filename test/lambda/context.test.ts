// Which policy entry an event's SecretId names (src/lambda/context.ts): AWS sends the secret's ARN,
// whose name carries a 6-character suffix; the policy names the secret or its ARN.
import { describe, expect, it } from 'vitest';
import { findNativeKey, nameInArn } from '../../src/lambda/context.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { JSON_SHAPE, keyPolicy } from '../rotation/harness.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:keyroll/billing-AbC123';

function policyWith(path: string, native = true): Policy {
  const key = keyPolicy('billing-api', 'org', { slots: ['a', 'b'], destinations: [{ backend: 'aws', target: { path, shape: JSON_SHAPE } }], ...(native ? { scheduler: 'aws-native' as const } : {}) });
  return { keys: [key] } as unknown as Policy;
}

describe('finding the entry of a rotation event', () => {
  it('reads the name out of a secret ARN', () => {
    expect(nameInArn(ARN)).toBe('keyroll/billing');
    expect(nameInArn('keyroll/billing')).toBeUndefined();
  });

  it('matches a policy path given as the name, or as the ARN', () => {
    expect(findNativeKey(policyWith('keyroll/billing'), ARN)?.id).toBe('billing-api');
    expect(findNativeKey(policyWith(ARN), ARN)?.id).toBe('billing-api');
    expect(findNativeKey(policyWith('keyroll/billing'), 'keyroll/billing')?.id).toBe('billing-api');
  });

  it('never matches another secret, a name that only starts the same, or an entry keyroll schedules', () => {
    expect(findNativeKey(policyWith('keyroll/bill'), ARN)).toBeUndefined();
    expect(findNativeKey(policyWith('keyroll/billing', false), ARN)).toBeUndefined();
  });
});
