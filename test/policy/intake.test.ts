// The policy's `intake` section: intake.github.apiUrl is a base URL keyroll appends paths to, so a
// query string or fragment is refused at load, at its line (issue 18, finding 5); alertOnly must
// name key entries.
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/load.ts';
import { useCliFixture } from '../cli/harness.ts';
import { policyRejection } from '../support/policy-rejection.ts';

const BASE = `version: 1
api:
  baseUrl: https://keys.example.com
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
keys:
  - id: key_a
    organization: org_a
    destinations: [{ backend: files, path: a.json }]
    maxAge: 30d
`;

const withApiUrl = (apiUrl: string): string => `${BASE}intake:
  github:
    webhookSecret: env:GH_SECRET
    token: env:GH_TOKEN
    apiUrl: ${apiUrl}
`;

describe('intake.github.apiUrl', () => {
  it('refuses a query string or a fragment, at its line', () => {
    for (const url of [
      '"https://github.example.com/api/v3?per_page=1"',
      '"https://github.example.com/api/v3#frag"',
      '"https://github.example.com/api/v3?"',
    ]) {
      const error = policyRejection(withApiUrl(url));
      expect(error.code, url).toBe('KR_POLICY_INVALID');
      expect(error.message, url).toMatch(
        /^policy\.yaml:16 intake\.github\.apiUrl: must be a base URL without a query string \(\?\) or fragment \(#\)/,
      );
    }
  });

  it('accepts a base URL with a path (GitHub Enterprise Server), and defaults to api.github.com', () => {
    expect(
      parsePolicy(withApiUrl('https://github.example.com/api/v3'), 'policy.yaml').intake?.github?.apiUrl,
    ).toBe('https://github.example.com/api/v3');
    expect(
      parsePolicy(
        `${BASE}intake:\n  github:\n    webhookSecret: env:GH_SECRET\n    token: env:GH_TOKEN\n`,
        'policy.yaml',
      ).intake?.github?.apiUrl,
    ).toBe('https://api.github.com');
  });
});

describe('keyroll validate with a query string in intake.github.apiUrl', () => {
  const cli = useCliFixture();

  it('exits 2 naming the file and line', async () => {
    await cli.writeFile('policy.yaml', withApiUrl('"https://github.example.com/api/v3?x=1"'));
    const result = await cli.run(['validate', '-p', 'policy.yaml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'policy.yaml:16 intake.github.apiUrl: must be a base URL without a query string',
    );
  });
});

describe('intake.github reconcile settings', () => {
  const withReconcile = (lines: string): string => `${BASE}intake:
  github:
    webhookSecret: env:GH_SECRET
    token: env:GH_TOKEN
${lines}`;

  it('defaults the interval to 5m and reads the places to list', () => {
    const github = parsePolicy(
      withReconcile(
        '    organizations: [octo-org]\n    repositories: [octo/app]\n    secretTypes: [keyroll_api_key]\n',
      ),
      'policy.yaml',
    ).intake?.github;
    expect(github?.reconcileInterval).toBe('5m');
    expect(github?.organizations).toEqual(['octo-org']);
    expect(github?.repositories).toEqual(['octo/app']);
  });

  it('requires secretTypes with a place to list: an unfiltered list holds every secret type of the organization', () => {
    const error = policyRejection(withReconcile('    organizations: [octo-org]\n'));
    expect(error.message).toMatch(
      /intake\.github\.secretTypes: is required with organizations, repositories or enterprises/,
    );
  });

  it('refuses an interval under a second and a repository that is not owner/name', () => {
    expect(
      policyRejection(
        withReconcile('    organizations: [octo-org]\n    secretTypes: [t]\n    reconcileInterval: 500ms\n'),
      ).message,
    ).toMatch(/intake\.github\.reconcileInterval: must be at least 1s/);
    expect(policyRejection(withReconcile('    repositories: [app]\n    secretTypes: [t]\n')).message).toMatch(
      /intake\.github\.repositories\[0\]: must be owner\/repository/,
    );
  });
});
