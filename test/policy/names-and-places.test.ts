// Issue 12 §7: names that exist on Object.prototype are not "defined" (a policy naming one
// passed validation and its alerts went nowhere), and two spellings of one secret (an AWS name and
// its ARN, Vault `a//b` and `a/b`) are one destination for the duplicate check.
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/policy/errors.ts';
import { parsePolicy } from '../../src/policy/load.ts';

const HEAD = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
  vault: { kind: vault, address: "http://127.0.0.1:8200", auth: { method: token, token: env:VAULT_TOKEN } }
  aws: { kind: aws, region: eu-west-1 }
alerts:
  sinks:
    hook: { kind: webhook, url: "http://127.0.0.1:9000/hook" }
defaults:
  maxAge: 30d
keys:
`;

function messageOf(text: string): string {
  try {
    parsePolicy(text, 'policy.yaml');
  } catch (error) {
    if (error instanceof PolicyError) return error.message;
    throw error;
  }
  throw new Error('expected the policy to be rejected');
}

const key = (id: string, destinations: string, extra = ''): string =>
  `  - { id: ${id}, organization: org_a, destinations: [${destinations}]${extra} }\n`;

describe('names inherited from Object.prototype', () => {
  it('notify.onFailure: [constructor] is an undefined sink', () => {
    expect(
      messageOf(
        `${HEAD}${key('key_a', '{ backend: files, path: a.json }', ', notify: { onFailure: [constructor] }')}`,
      ),
    ).toBe(
      'policy.yaml:15 keys[0].notify.onFailure[0]: sink "constructor" is not defined in alerts.sinks (defined: hook)',
    );
  });

  it('notify.onSuccess: [toString] in defaults is an undefined sink', () => {
    const text = HEAD.replace('  maxAge: 30d\n', '  maxAge: 30d\n  notify: { onSuccess: [toString] }\n');
    expect(messageOf(`${text}${key('key_a', '{ backend: files, path: a.json }')}`)).toBe(
      'policy.yaml:14 defaults.notify.onSuccess[0]: sink "toString" is not defined in alerts.sinks (defined: hook)',
    );
  });

  it('backend: __proto__ and backend: hasOwnProperty are undefined backends', () => {
    expect(
      messageOf(
        `${HEAD}${key('key_a', '{ backend: __proto__, path: a.json }')}${key('key_b', '{ backend: hasOwnProperty, path: b.json }')}`,
      ),
    ).toBe(
      [
        'policy.yaml:15 keys[0].destinations[0].backend: backend "__proto__" is not defined in backends (defined: files, vault, aws)',
        'policy.yaml:16 keys[1].destinations[0].backend: backend "hasOwnProperty" is not defined in backends (defined: files, vault, aws)',
      ].join('\n'),
    );
  });

  it('a sink really named constructor is found', () => {
    const text = HEAD.replace(
      '    hook: {',
      '    constructor: { kind: webhook, url: "http://127.0.0.1:9001/x" }\n    hook: {',
    );
    const policy = parsePolicy(
      `${text}${key('key_a', '{ backend: files, path: a.json }', ', notify: { onFailure: [constructor] }')}`,
      'policy.yaml',
    );
    expect(policy.keys[0]?.notify.onFailure).toEqual(['constructor']);
  });
});

describe('one secret spelt two ways', () => {
  it('an AWS secret by name and by ARN', () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/billing-AbC123';
    expect(
      messageOf(
        `${HEAD}${key('key_a', '{ backend: aws, path: prod/billing }')}${key('key_b', `{ backend: aws, path: "${arn}" }`)}`,
      ),
    ).toBe(
      `policy.yaml:16 keys[1].destinations[0].path: aws:${arn} is already a destination of keys[0] (key_a); each secret needs its own path`,
    );
  });

  it('ARNs of another region or another name are other secrets', () => {
    const other = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/billing-AbC123';
    const longer = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/billing2-XyZ789';
    const policy = parsePolicy(
      `${HEAD}${key('key_a', '{ backend: aws, path: prod/billing }')}${key('key_b', `{ backend: aws, path: "${other}" }`)}${key('key_c', `{ backend: aws, path: "${longer}" }`)}`,
      'policy.yaml',
    );
    expect(policy.keys).toHaveLength(3);
  });

  it('Vault paths a//b, /a/b/ and a/b', () => {
    expect(
      messageOf(
        `${HEAD}${key('key_a', '{ backend: vault, path: a/b }')}${key('key_b', '{ backend: vault, path: "a//b" }')}${key('key_c', '{ backend: vault, path: /a/b/ }')}`,
      ),
    ).toBe(
      [
        'policy.yaml:16 keys[1].destinations[0].path: vault:a//b is already a destination of keys[0] (key_a); each secret needs its own path',
        'policy.yaml:17 keys[2].destinations[0].path: vault:/a/b/ is already a destination of keys[0] (key_a); each secret needs its own path',
      ].join('\n'),
    );
  });

  it('two backend names for one Vault server and mount', () => {
    const text = HEAD.replace(
      '  aws: {',
      '  vault2: { kind: vault, address: "http://127.0.0.1:8200/", auth: { method: token, token: env:OTHER } }\n  aws: {',
    );
    expect(
      messageOf(
        `${text}${key('key_a', '{ backend: vault, path: a/b }')}${key('key_b', '{ backend: vault2, path: a/b }')}`,
      ),
    ).toBe(
      'policy.yaml:17 keys[1].destinations[0].path: vault2:a/b is already a destination of keys[0] (key_a); each secret needs its own path',
    );
  });
});
