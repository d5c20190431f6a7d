// Each kind of mistake an operator makes gives one exact `file:line path: sentence`.
import { describe, expect, it } from 'vitest';
import type { PolicyIssue } from '../../src/policy/errors.ts';
import { policyRejection } from '../support/policy-rejection.ts';

// Lines 1-9 are valid; tests append or replace below. Line 8 is `  - id: key_a`.
const HEAD = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
keys:
  - id: key_a
    organization: org_a
`;
const DESTINATION = '    destinations: [{ backend: files, path: a.json }]\n';

function messageOf(text: string): string {
  return policyRejection(text).message;
}

describe('schema errors', () => {
  it('a bad cron expression', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    schedule: not a cron\n`)).toBe(
      'policy.yaml:11 keys[0].schedule: "not a cron" is not a cron expression',
    );
  });

  it('a cron expression with an out-of-range field says which', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    schedule: "61 * * * *"\n`)).toBe(
      'policy.yaml:11 keys[0].schedule: "61 * * * *" is not a cron expression (invalid value for minute: 61)',
    );
  });

  it('a cron expression that never fires', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    schedule: "0 0 31 2 *"\n`)).toBe(
      'policy.yaml:11 keys[0].schedule: "0 0 31 2 *" never fires',
    );
  });

  it('a bad time zone', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n    timezone: Mars/Olympus\n`)).toBe(
      'policy.yaml:12 keys[0].timezone: "Mars/Olympus" is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)',
    );
  });

  it('a bad duration, and a bare number', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7 days\n`)).toBe(
      'policy.yaml:11 keys[0].maxAge: "7 days" is not a duration (use a number and a unit: ms, s, m, h, d or w, e.g. 15m or 7d)',
    );
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 30\n`)).toBe(
      'policy.yaml:11 keys[0].maxAge: must be a duration with a unit, such as 30d or 15m',
    );
  });

  it('an unknown field, with the likely intended name', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n    minIntervall: 1h\n`)).toBe(
      'policy.yaml:12 keys[0].minIntervall: is not a known field (did you mean "minInterval"?)',
    );
  });

  it('an unknown field far from any known one lists the known fields', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n    shape: raw\n`)).toMatch(
      /^policy\.yaml:12 keys\[0\]\.shape: is not a known field \(known here: id, organization, destinations, fallbacks, labels, schedule, /,
    );
  });

  it('an unknown field inside a backend is checked against that backend kind', () => {
    const text = HEAD.replace('directory: ./secrets }', 'directory: ./secrets, region: eu-west-1 }');
    expect(messageOf(`${text}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:6 backends.files.region: is not a known field (known here: kind, directory)',
    );
  });

  it('a missing destination list', () => {
    expect(messageOf(`${HEAD}    maxAge: 7d\n`)).toBe('policy.yaml:8 keys[0].destinations: is required');
  });

  it('an empty destination list', () => {
    expect(messageOf(`${HEAD}    destinations: []\n    maxAge: 7d\n`)).toBe(
      'policy.yaml:10 keys[0].destinations: a key needs at least one destination',
    );
  });

  it('a literal secret where a reference belongs, without echoing it', () => {
    const literal = 'sk_live_4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c';
    const error = policyRejection(
      `${HEAD.replace('env:KEYROLL_API_TOKEN', literal)}${DESTINATION}    maxAge: 7d\n`,
    );
    expect(error.message).toBe(
      'policy.yaml:4 api.credential.token: must be a reference like env:NAME or file:/absolute/path, never a literal secret',
    );
    expect(JSON.stringify(error.issues)).not.toContain(literal);
    expect(JSON.stringify(error.toFields())).not.toContain(literal);
  });

  it('an unknown backend kind', () => {
    const text = HEAD.replace('kind: file', 'kind: s3');
    expect(messageOf(`${text}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:6 backends.files.kind: must be one of aws, vault, file',
    );
  });

  it('a backend without a kind lists the kinds', () => {
    const text = HEAD.replace('{ kind: file, directory: ./secrets }', '{ directory: ./secrets }');
    expect(messageOf(`${text}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:6 backends.files.kind: is required (one of aws, vault, file)',
    );
  });

  it('an escrow recipient that is not an age public key', () => {
    expect(
      messageOf(
        `escrow:\n  directory: /var/lib/keyroll/escrow\n  recipients: [ssh-ed25519 AAAAC3Nza]\n${HEAD}${DESTINATION}    maxAge: 7d\n`,
      ),
    ).toBe(
      'policy.yaml:3 escrow.recipients[0]: must be an age X25519 public key (age1 followed by 58 lowercase letters and digits)',
    );
  });

  it('a literal OAuth client secret is refused without being echoed', () => {
    const literal = 'cs_8d7f6e5d4c3b2a1908f7e6d5c4b3a291';
    const oauth = `{ type: oauth2, tokenUrl: https://keys.example.com/oauth/token, clientId: keyroll, clientSecret: ${literal} }`;
    const error = policyRejection(
      `${HEAD.replace('{ type: bearer, token: env:KEYROLL_API_TOKEN }', oauth)}${DESTINATION}    maxAge: 7d\n`,
    );
    expect(error.message).toBe(
      'policy.yaml:4 api.credential.clientSecret: must be a reference like env:NAME or file:/absolute/path, never a literal secret',
    );
    expect(error.message).not.toContain(literal);
  });

  it('a wrong version', () => {
    expect(messageOf(`${HEAD.replace('version: 1', 'version: 2')}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:1 version: must be 1 (the only policy version this keyroll reads)',
    );
  });

  it('a missing required field points at the mapping that lacks it', () => {
    expect(messageOf(`${HEAD.replace('    organization: org_a\n', '')}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:8 keys[0].organization: is required',
    );
  });

  it('a document that is not a mapping', () => {
    expect(messageOf('- 1\n- 2\n')).toBe(
      'policy.yaml:1: the policy must be a mapping (field: value), not a list',
    );
  });

  it('lists every issue, in line order', () => {
    const error = policyRejection(
      `${HEAD.replace('version: 1', 'version: 3')}${DESTINATION}    schedule: nope\n    maxAge: soon\n`,
    );
    expect(error.code).toBe('KR_POLICY_INVALID');
    expect(error.issues.map((issue: PolicyIssue) => `${issue.line} ${issue.path}`)).toEqual([
      '1 version',
      '11 keys[0].schedule',
      '12 keys[0].maxAge',
    ]);
    expect(error.message.split('\n')).toHaveLength(3);
  });
});

describe('semantic errors', () => {
  it('duplicate key ids', () => {
    const second =
      '  - id: key_a\n    organization: org_b\n    destinations: [{ backend: files, path: b.json }]\n';
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n${second}    maxAge: 7d\n`)).toBe(
      'policy.yaml:12 keys[1].id: "key_a" is already used by keys[0]; key ids must be unique',
    );
  });

  it('an unknown backend', () => {
    expect(messageOf(`${HEAD}    destinations: [{ backend: vault-prod, path: a }]\n    maxAge: 7d\n`)).toBe(
      'policy.yaml:10 keys[0].destinations[0].backend: backend "vault-prod" is not defined in backends (defined: files)',
    );
  });

  it('an unknown fallback backend', () => {
    expect(
      messageOf(
        `${HEAD}${DESTINATION}    fallbacks:\n      - backend: nowhere\n        path: a\n    maxAge: 7d\n`,
      ),
    ).toBe(
      'policy.yaml:12 keys[0].fallbacks[0].backend: backend "nowhere" is not defined in backends (defined: files)',
    );
  });

  it('an unknown alert sink', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n    notify: { onFailure: [pager] }\n`)).toBe(
      'policy.yaml:12 keys[0].notify.onFailure[0]: sink "pager" is not defined in alerts.sinks (none are defined)',
    );
  });

  it('an onSuccess sink that is not a webhook', () => {
    const sinks =
      'alerts:\n  sinks:\n    chat: { kind: slack, webhookUrl: env:SLACK_WEBHOOK_URL }\ndefaults:\n  notify:\n    onSuccess: [chat]\n';
    expect(messageOf(`${sinks}${HEAD}${DESTINATION}    maxAge: 7d\n`)).toBe(
      'policy.yaml:6 defaults.notify.onSuccess[0]: sink "chat" is a slack sink; onSuccess sinks must be kind webhook',
    );
  });

  it('a key with neither schedule nor maxAge', () => {
    expect(messageOf(`${HEAD}${DESTINATION}`)).toBe(
      'policy.yaml:8 keys[0]: has neither a schedule nor a maxAge, so it would never be due; set one on the key or in defaults',
    );
  });

  it('switching off the default schedule leaves the key without one', () => {
    expect(messageOf(`defaults:\n  schedule: "0 3 * * *"\n${HEAD}${DESTINATION}    schedule: null\n`)).toBe(
      'policy.yaml:10 keys[0]: has neither a schedule nor a maxAge, so it would never be due; set one on the key or in defaults',
    );
  });

  it('two keys writing the same secret', () => {
    const second =
      '  - id: key_b\n    organization: org_a\n    destinations: [{ backend: files, path: ./a.json }]\n';
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n${second}    maxAge: 7d\n`)).toBe(
      'policy.yaml:14 keys[1].destinations[0].path: files:./a.json is already a destination of keys[0] (key_a); each secret needs its own path',
    );
  });

  it('a file destination escaping its directory', () => {
    expect(messageOf(`${HEAD}    destinations: [{ backend: files, path: ../etc/a }]\n    maxAge: 7d\n`)).toBe(
      'policy.yaml:10 keys[0].destinations[0].path: must be a relative path inside the directory of file backend "files"',
    );
  });

  it('a maxAge shorter than the minimum interval', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 30m\n`)).toBe(
      'policy.yaml:11 keys[0].maxAge: maxAge (30m) is shorter than minInterval (1h), so the key would be due before it may rotate again',
    );
  });

  it('an initial backoff longer than the maximum', () => {
    expect(
      messageOf(
        `defaults:\n  store: { initialBackoff: 10s, maxBackoff: 2s }\n${HEAD}${DESTINATION}    maxAge: 7d\n`,
      ),
    ).toBe(
      'policy.yaml:2 defaults.store.initialBackoff: initialBackoff (10s) is longer than maxBackoff (2s)',
    );
  });
});

describe('YAML errors', () => {
  it('a duplicate YAML key names the field and its line', () => {
    const error = policyRejection(`${HEAD}${DESTINATION}    maxAge: 7d\n    maxAge: 14d\n`);
    expect(error.code).toBe('KR_POLICY_SYNTAX');
    expect(error.message).toBe(
      'policy.yaml:12 keys[0].maxAge: is written twice in the same mapping (YAML keys must be unique)',
    );
  });

  it('a syntax error gives its line', () => {
    const error = policyRejection(
      `${HEAD}    destinations: [{ backend: files, path: a.json }\n    maxAge: 7d\n`,
    );
    expect(error.code).toBe('KR_POLICY_SYNTAX');
    expect(error.issues[0]?.line).toBe(11);
    expect(error.message).toMatch(/^policy\.yaml:11: invalid YAML: /);
  });

  it('a second YAML document', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: 7d\n---\nversion: 1\n`)).toBe(
      'policy.yaml:12: the file holds more than one YAML document (a second ---); a policy is a single document',
    );
  });

  it('an alias without an anchor', () => {
    expect(messageOf(`${HEAD}${DESTINATION}    maxAge: *age\n`)).toBe(
      'policy.yaml:11: alias *age refers to no anchor defined before it',
    );
  });

  it('an empty file', () => {
    expect(messageOf('# nothing yet\n')).toBe(
      'policy.yaml:1: the policy is empty; it needs version, api, backends and keys',
    );
  });

  it('names the file as the user gave it', () => {
    expect(policyRejection(`${HEAD}${DESTINATION}`, '../deploy/prod.yaml').message).toMatch(
      /^\.\.\/deploy\/prod\.yaml:8 keys\[0\]: /,
    );
  });
});
