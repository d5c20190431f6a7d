// Which policy entries an event's SecretId names (src/lambda/secret-location.ts): AWS sends the secret's ARN,
// whose name carries a 6-character suffix; the policy names the secret or its ARN. Where the
// secret lives is compared in secret-location.test.ts.
import { describe, expect, it } from 'vitest';
import { nativeKeysNamed, parseSecretArn } from '../../src/lambda/secret-location.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { JSON_SHAPE, keyPolicy } from '../rotation/harness.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:keyroll/billing-AbC123';

function policyWith(path: string, native = true): Policy {
  const key = keyPolicy('billing-api', 'org', {
    slots: ['a', 'b'],
    destinations: [{ backend: 'aws', target: { path, shape: JSON_SHAPE } }],
    ...(native ? { scheduler: 'aws-native' as const } : {}),
  });
  return { keys: [key] } as unknown as Policy;
}

describe('finding the entry of a rotation event', () => {
  it('reads the name out of a secret ARN', () => {
    expect(parseSecretArn(ARN)?.name).toBe('keyroll/billing');
    expect(parseSecretArn('keyroll/billing')).toBeUndefined();
  });

  it('matches a policy path given as the name, or as the ARN', () => {
    expect(nativeKeysNamed(policyWith('keyroll/billing'), ARN)[0]?.id).toBe('billing-api');
    expect(nativeKeysNamed(policyWith(ARN), ARN)[0]?.id).toBe('billing-api');
    expect(nativeKeysNamed(policyWith('keyroll/billing'), 'keyroll/billing')[0]?.id).toBe('billing-api');
  });

  it('never matches another secret, a name that only starts the same, or an entry keyroll schedules', () => {
    expect(nativeKeysNamed(policyWith('keyroll/bill'), ARN)).toEqual([]);
    expect(nativeKeysNamed(policyWith('keyroll/billing', false), ARN)).toEqual([]);
  });
});
