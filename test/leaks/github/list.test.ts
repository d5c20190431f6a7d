// The list's URLs: filtered to open alerts of the policy's types, no secret asked for, and the
// next page followed only below the configured API base (the token goes with it).
import { describe, expect, it } from 'vitest';
import { firstPageUrl, nextLink } from '../../../src/leaks/github/list.ts';

describe('firstPageUrl', () => {
  it('asks each scope for open alerts of the secret types, 100 a page, without secrets, from the first cursor', () => {
    expect(firstPageUrl('https://api.github.com/', { kind: 'organization', org: 'octo' }, ['a', 'b'])).toBe(
      'https://api.github.com/orgs/octo/secret-scanning/alerts?state=open&secret_type=a%2Cb&per_page=100&hide_secret=true&after=',
    );
    expect(
      firstPageUrl('https://ghe.example.com/api/v3', { kind: 'repository', owner: 'octo', repo: 'app' }, [
        'a',
      ]),
    ).toMatch(/^https:\/\/ghe\.example\.com\/api\/v3\/repos\/octo\/app\/secret-scanning\/alerts\?/);
    expect(firstPageUrl('https://api.github.com', { kind: 'enterprise', enterprise: 'acme' }, ['a'])).toMatch(
      /^https:\/\/api\.github\.com\/enterprises\/acme\/secret-scanning\/alerts\?/,
    );
  });
});

describe('nextLink', () => {
  it('reads rel="next" among the other relations', () => {
    const link =
      '<https://api.github.com/orgs/octo/secret-scanning/alerts?after=Y3Vy&per_page=100>; rel="next", <https://api.github.com/orgs/octo/secret-scanning/alerts?before=x>; rel="prev"';
    expect(nextLink(link, 'https://api.github.com')).toBe(
      'https://api.github.com/orgs/octo/secret-scanning/alerts?after=Y3Vy&per_page=100',
    );
    expect(
      nextLink('<https://api.github.com/x?before=a>; rel="prev"', 'https://api.github.com'),
    ).toBeUndefined();
    expect(nextLink(undefined, 'https://api.github.com')).toBeUndefined();
  });

  it('refuses a next page outside the API base: the token is not sent there', () => {
    expect(() =>
      nextLink(
        '<https://evil.example.com/orgs/octo/secret-scanning/alerts?after=a>; rel="next"',
        'https://api.github.com',
      ),
    ).toThrow(/outside intake\.github\.apiUrl/);
    expect(() =>
      nextLink('<https://ghe.example.com/other/orgs/x>; rel="next"', 'https://ghe.example.com/api/v3'),
    ).toThrow(/outside intake\.github\.apiUrl/);
  });
});
