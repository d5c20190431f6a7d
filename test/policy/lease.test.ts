// Invariant 9: a lockTtl that cannot cover one roll attempt plus the primary write with its
// retries (plus the clock skew other runners allow) is refused with the line to change.
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/policy/errors.ts';
import { leaseNeededMs } from '../../src/policy/lease.ts';
import { parsePolicy } from '../../src/policy/load.ts';

const policy = (
  extra: string,
  backend = '  files: { kind: file, directory: ./secrets }',
): string => `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
${backend}
keys:
  - id: key_a
    organization: org_a
    destinations: [{ backend: files, path: a.json }]
    maxAge: 30d
${extra}`;

function rejection(text: string): string {
  try {
    parsePolicy(text, 'policy.yaml');
  } catch (error) {
    if (error instanceof PolicyError) return error.message;
    throw error;
  }
  throw new Error('expected the policy to be rejected');
}

describe('lockTtl lower bound (invariant 9)', () => {
  it('adds the roll attempt, every write attempt with its waits, and the clock skew', () => {
    expect(
      leaseNeededMs({
        rollAttemptMs: 20_000,
        writeTimeoutMs: 10_000,
        attempts: 5,
        maxBackoffMs: 5_000,
        clockSkewMs: 10_000,
      }),
    ).toBe(20_000 + 50_000 + 20_000 + 10_000);
  });

  it('refuses the 2s lockTtl of the review (default timeouts: 20s roll attempt) at its line', () => {
    expect(rejection(policy('    lockTtl: 2s\n'))).toMatch(
      /^policy\.yaml:12 keys\[0\]\.lockTtl: lockTtl \(2s\) is shorter than one roll attempt plus the primary write/,
    );
  });

  it('counts the primary backend request timeout for each write attempt', () => {
    const vault =
      '  files: { kind: vault, address: http://127.0.0.1:8200, mount: secret, auth: { method: token, token: env:VAULT_TOKEN }, timeoutMs: 60000 }';
    // 20s + 5 × 60s + 4 × 5s + 10s = 350s > 5m
    expect(rejection(policy('    lockTtl: 5m\n', vault))).toMatch(
      /lockTtl \(5m\) is shorter .*\(5m 50s\)|lockTtl \(5m\) is shorter/,
    );
  });

  it('points at defaults when the short lockTtl is inherited', () => {
    const text = `${policy('')}defaults:\n  lockTtl: 30s\n`;
    expect(rejection(text)).toMatch(/^policy\.yaml:13 defaults\.lockTtl: lockTtl \(30s\)/);
  });

  it('accepts a short lockTtl when timeouts, retries and skew are short too', () => {
    const text = policy(
      '    lockTtl: 2s\n    clockSkew: 100ms\n    store: { attempts: 2, initialBackoff: 1ms, maxBackoff: 10ms }\n',
    ).replace('  credential:', '  timeouts: { headersMs: 500, bodyMs: 500 }\n  credential:');
    const parsed = parsePolicy(text, 'policy.yaml');
    expect(parsed.keys[0]).toMatchObject({ lockTtlMs: 2_000, clockSkewMs: 100 });
  });

  it('the default lockTtl (15m) and clockSkew (10s) pass with default timeouts', () => {
    expect(parsePolicy(policy(''), 'policy.yaml').keys[0]).toMatchObject({
      lockTtlMs: 900_000,
      clockSkewMs: 10_000,
    });
  });
});
