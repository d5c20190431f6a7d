// The daemon's policy file with --keys-from kubernetes: the settings every key shares. Keys,
// backends, the API and defaults are keyroll.io objects then, and a file still naming them is
// refused with file:line and a pointer, never silently ignored.
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/policy/errors.ts';
import { parseSharedSettings } from '../../src/policy/settings-file.ts';

const FILE = 'settings.yaml';

describe('the daemon settings file (keys from keyroll.io objects)', () => {
  it('reads version, keyApi and the shared sections', () => {
    const settings = parseSharedSettings(
      'version: 1\nkeyApi: acme\nalerts:\n  sinks:\n    oncall: { kind: pagerduty, routingKey: env:PD }\n',
      FILE,
    );
    expect(settings.keyApi).toBe('acme');
    expect(Object.keys(settings.alerts?.sinks ?? {})).toEqual(['oncall']);
  });

  it('refuses keys and backends with their line and what they became', () => {
    let caught: unknown;
    try {
      parseSharedSettings('version: 1\nbackends: {}\nkeys: []\n', FILE);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(PolicyError);
    const error = caught as PolicyError;
    expect(error.code).toBe('KR_POLICY_INVALID');
    expect(error.issues.map((issue) => [issue.line, issue.path])).toEqual([
      [2, 'backends'],
      [3, 'keys'],
    ]);
    expect(error.issues[0]?.message).toMatch(/KeyStores and ClusterKeyStores/);
    expect(error.issues[1]?.message).toMatch(/RotatedKey objects/);
  });

  it('refuses an unknown field as the policy does', () => {
    expect(() => parseSharedSettings('version: 1\nkeyapi: acme\n', FILE)).toThrow(PolicyError);
  });
});
