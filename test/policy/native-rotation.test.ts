// `scheduler: aws-native` (issue 22): which entries Secrets Manager may rotate with keyroll as the
// rotation function, each refusal as one exact `file:line path: sentence`.
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/load.ts';
import { policyRejection } from '../support/policy-rejection.ts';

// Lines 1-8; the first entry starts at line 9.
const HEAD = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  aws: { kind: aws, region: eu-west-1 }
  files: { kind: file, directory: ./secrets }
keys:
`;

function entry(id: string, backend: string, extra: string[]): string {
  return `  - id: ${id}\n    organization: org_a\n    destinations: [{ backend: ${backend}, path: keyroll/${id} }]\n${extra.map((line) => `    ${line}\n`).join('')}`;
}

const SLOTS = ['slots: [key_a, key_b]', 'consumerRefresh: 1h', 'maxAge: 7d'];

describe('scheduler: aws-native', () => {
  it('a two-slot entry with one aws destination resolves with scheduler aws-native; others have none', () => {
    const policy = parsePolicy(
      `${HEAD}${entry('billing-api', 'aws', [...SLOTS, 'scheduler: aws-native'])}${entry('key_c', 'aws', ['maxAge: 7d', 'scheduler: keyroll'])}`,
      'policy.yaml',
    );
    expect(policy.keys[0]?.scheduler).toBe('aws-native');
    expect(Object.keys(policy.keys[1] ?? {})).not.toContain('scheduler');
  });

  it('a single key is refused with why', () => {
    expect(
      policyRejection(`${HEAD}${entry('key_c', 'aws', ['maxAge: 7d', 'scheduler: aws-native'])}`).message,
    ).toBe(
      'policy.yaml:13 keys[0].scheduler: aws-native needs a slot entry (slots: [KEY_A, KEY_B]): a single key dies at the roll in createSecret, so consumers would read a dead AWSCURRENT until finishSecret moves it; rotate single keys with keyroll run or the daemon',
    );
  });

  it('a destination that is not aws is refused', () => {
    expect(
      policyRejection(`${HEAD}${entry('billing-api', 'files', [...SLOTS, 'scheduler: aws-native'])}`).message,
    ).toBe(
      'policy.yaml:15 keys[0].scheduler: aws-native needs an aws destination; backend "files" is kind file',
    );
  });

  it('an unknown scheduler is refused', () => {
    expect(
      policyRejection(`${HEAD}${entry('billing-api', 'aws', [...SLOTS, 'scheduler: cron'])}`).message,
    ).toBe('policy.yaml:15 keys[0].scheduler: must be one of keyroll, aws-native');
  });
});
