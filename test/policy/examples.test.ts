// The least-privilege examples must grant what the example policies need, no less: a policy
// example whose paths the IAM or Vault example does not cover would fail preflight on day one.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { loadPolicy } from '../../src/policy/load.ts';

const config = (name: string): string => new URL(`../../config/${name}`, import.meta.url).pathname;

/** IAM / Vault glob (`*` matches anything, `?` one character) as a RegExp. */
function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

interface IamStatement {
  Action: string | string[];
  Resource: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

describe('config/iam-policy.json', () => {
  it('covers every AWS destination and its lock secret of config/aws-policy.yaml', async () => {
    const policy = await loadPolicy(config('aws-policy.yaml'));
    const iam = JSON.parse(await readFile(config('iam-policy.json'), 'utf8')) as {
      Statement: IamStatement[];
    };
    const allows = (action: string, arn: string): boolean =>
      iam.Statement.some(
        (statement) =>
          [statement.Action].flat().includes(action) &&
          [statement.Resource].flat().some((glob) => globToRegExp(glob).test(arn)),
      );

    for (const key of policy.keys) {
      for (const destination of [...key.destinations, ...key.fallbacks]) {
        const backend = policy.backends[destination.backend];
        if (backend?.kind !== 'aws') continue;
        for (const name of [destination.target.path, `${destination.target.path}.keyroll-lock`]) {
          // Secrets Manager ARNs end in a random 6-character suffix.
          const arn = `arn:aws:secretsmanager:${backend.region ?? ''}:123456789012:secret:${name}-AbCdEf`;
          for (const action of [
            'DescribeSecret',
            'GetSecretValue',
            'PutSecretValue',
            'UpdateSecretVersionStage',
            'CreateSecret',
            'TagResource',
          ]) {
            expect(allows(`secretsmanager:${action}`, arn), `${action} on ${arn}`).toBe(true);
          }
        }
      }
    }
  });

  it('lets keyroll tag with every tag key the AWS backends configure', async () => {
    const policy = await loadPolicy(config('aws-policy.yaml'));
    const iam = JSON.parse(await readFile(config('iam-policy.json'), 'utf8')) as {
      Statement: IamStatement[];
    };
    const tagStatement = iam.Statement.find((statement) => statement.Action === 'secretsmanager:TagResource');
    const allowedKeys = [tagStatement?.Condition?.['ForAllValues:StringLike']?.['aws:TagKeys'] ?? []].flat();
    for (const backend of Object.values(policy.backends)) {
      if (backend.kind !== 'aws') continue;
      for (const tagKey of [...Object.keys(backend.tags), 'managed-by', 'keyroll:intent']) {
        expect(
          allowedKeys.some((glob) => globToRegExp(glob).test(tagKey)),
          tagKey,
        ).toBe(true);
      }
    }
  });
});

describe('config/vault-policy.hcl', () => {
  it.each(['vault-policy.yaml', 'slot-policy.yaml'])(
    'grants create, read and update on the data, lock and metadata of every Vault destination of config/%s',
    async (example) => {
      const policy = await loadPolicy(config(example));
      const hcl = await readFile(config('vault-policy.hcl'), 'utf8');
      const rules = [...hcl.matchAll(/path "([^"]+)" \{\s*capabilities = \[([^\]]*)\]/g)].map((match) => ({
        path: globToRegExp(match[1] ?? ''),
        capabilities: (match[2] ?? '').split(',').map((capability) => capability.trim().replace(/"/g, '')),
      }));
      const granted = (apiPath: string): string[] =>
        rules.filter((rule) => rule.path.test(apiPath)).flatMap((rule) => rule.capabilities);

      for (const key of policy.keys) {
        for (const destination of [...key.destinations, ...key.fallbacks]) {
          const backend = policy.backends[destination.backend];
          if (backend?.kind !== 'vault') continue;
          const path = destination.target.path;
          for (const apiPath of [
            `${backend.mount}/data/${path}`,
            `${backend.mount}/data/${path}.keyroll-lock`,
            `${backend.mount}/metadata/${path}`,
          ]) {
            expect(granted(apiPath), apiPath).toEqual(expect.arrayContaining(['create', 'read', 'update']));
            expect(granted(apiPath), apiPath).not.toContain('delete');
          }
        }
      }
      expect(granted('sys/capabilities-self')).toContain('update');
    },
  );
});
