// The AWS-native rotation function's artifact (`npm run build`: dist/keyroll-aws-rotation.zip,
// scripts/build-rotation-function.ts): one index.mjs that runs with no node_modules anywhere, as in
// Lambda, and exports the handler the CloudFormation template names (index.handler).
import { spawnSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unzipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { parse, type Tags } from 'yaml';
import type { AwsAction } from '../../src/backends/aws/errors.ts';
import { buildRotationFunction } from '../../scripts/build-rotation-function.ts';
import { useTempDir } from '../support/temp-dir.ts';

describe('the rotation function zip', () => {
  const temp = useTempDir('keyroll-rotation-fn-');

  it('holds one index.mjs that loads without node_modules and refuses a non-rotation event by its code', async () => {
    const zipPath = await buildRotationFunction(join(temp.path(), 'dist'));
    const files = unzipSync(new Uint8Array(await readFile(zipPath)));
    expect(Object.keys(files)).toEqual(['index.mjs']);
    const run = join(temp.path(), 'task');
    await import('node:fs/promises').then((fs) => fs.mkdir(run));
    await writeFile(join(run, 'index.mjs'), files['index.mjs'] ?? new Uint8Array());
    const script =
      "const { handler } = await import('./index.mjs'); try { await handler({ Step: 'createSecret' }); } catch (e) { process.stdout.write(String(e.code)); }";
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: run,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(child.stderr).toBe('');
    expect(child.stdout).toBe('KR_NATIVE_EVENT_INVALID');
  }, 120_000);

  it('the CloudFormation template names the handler, the Node 24 runtime and the zip', async () => {
    const template = await readFile(
      new URL('../../deploy/aws-native-rotation.yaml', import.meta.url),
      'utf8',
    );
    expect(template).toContain('Handler: index.handler');
    expect(template).toContain('Runtime: nodejs24.x');
    expect(template).toContain('Principal: secretsmanager.amazonaws.com');
    expect(template).toContain('keyroll-aws-rotation.zip');
  });
});

// CloudFormation's short forms (!Ref, !Sub, ...) read as their long forms ({ Ref: ... }).
const CFN_TAGS: Tags = ['Ref', 'Sub', 'GetAtt', 'If', 'Not', 'Equals'].flatMap((name) => [
  { tag: `!${name}`, resolve: (value: string) => ({ [name === 'Ref' ? 'Ref' : `Fn::${name}`]: value }) },
  {
    tag: `!${name}`,
    collection: 'seq' as const,
    resolve: (value: unknown) => ({ [`Fn::${name}`]: (value as { toJSON: () => unknown }).toJSON() }),
  },
]);

interface Statement {
  Sid?: string;
  Action: string | string[];
  Resource: unknown;
}

describe("keyroll's own API credential in the CloudFormation template", () => {
  it("is never resolved into the function's configuration: only its ARN is, and the role may read exactly that secret", async () => {
    const text = await readFile(new URL('../../deploy/aws-native-rotation.yaml', import.meta.url), 'utf8');
    expect(text).not.toContain('{{resolve:');
    const template = parse(text, { customTags: CFN_TAGS }) as {
      Resources: {
        Function: { Properties: { Environment: { Variables: Record<string, unknown> } } };
        Role: {
          Properties: {
            Policies: { PolicyDocument: { Statement: (Statement | { 'Fn::If': unknown })[] } }[];
          };
        };
      };
    };
    const variables = template.Resources.Function.Properties.Environment.Variables;
    expect(variables.KEYROLL_API_TOKEN).toBeUndefined();
    expect(variables.KEYROLL_API_TOKEN_SECRET_ARN).toEqual({ Ref: 'ApiCredentialSecretArn' });
    const statements = template.Resources.Role.Properties.Policies.flatMap(
      (policy) => policy.PolicyDocument.Statement,
    ).filter((statement): statement is Statement => 'Action' in statement);
    const reads = statements.find((statement) => statement.Sid === 'ReadOwnApiCredential');
    expect(reads).toMatchObject({
      Action: 'secretsmanager:GetSecretValue',
      Resource: { Ref: 'ApiCredentialSecretArn' },
    });
  });
});

interface Template {
  Parameters: Record<string, { Type: string; Default?: string; MinLength?: number; AllowedPattern?: string }>;
  Resources: {
    Role: {
      Properties: {
        Policies: {
          PolicyDocument: { Statement: (Statement | { 'Fn::If': [string, Statement, unknown] })[] };
        }[];
      };
    };
    InvokeBySecretsManager: { Properties: Record<string, unknown> };
  };
}

async function template(): Promise<Template> {
  return parse(await readFile(new URL('../../deploy/aws-native-rotation.yaml', import.meta.url), 'utf8'), {
    customTags: CFN_TAGS,
  }) as Template;
}

/** Every statement of the role, those behind a condition (Fn::If) included. */
function statementsOf(t: Template): Statement[] {
  return t.Resources.Role.Properties.Policies.flatMap((policy) => policy.PolicyDocument.Statement).map(
    (statement) => ('Fn::If' in statement ? statement['Fn::If'][1] : statement),
  );
}

const actionsOf = (statement: Statement): string[] =>
  Array.isArray(statement.Action) ? statement.Action : [statement.Action];

/** What the rotation function's secrets are, in the role's grants and the invoke permission. */
const UNDER_PREFIX = {
  'Fn::Sub':
    'arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${SecretNamePrefix}*',
};

describe('least privilege in the CloudFormation template (issue 27, finding 8)', () => {
  it('SecretNamePrefix can be neither empty nor a wildcard: either would reach every secret of the account', async () => {
    const parameter = (await template()).Parameters.SecretNamePrefix;
    expect(parameter?.MinLength).toBeGreaterThanOrEqual(1);
    expect(parameter?.AllowedPattern).toBeDefined();
    // CloudFormation checks MinLength and the whole value against AllowedPattern (a Java regex; this one reads the same in JS).
    const accepts = (value: string): boolean =>
      value.length >= (parameter?.MinLength ?? 0) && new RegExp(parameter?.AllowedPattern ?? '').test(value);
    for (const good of ['keyroll/', 'keyroll/prod/', 'teams/billing-', parameter?.Default ?? ''])
      expect(accepts(good), good).toBe(true);
    for (const bad of ['', '*', 'keyroll/*', 'key?oll/', 'keyroll/ prod', '${AWS::StackName}'])
      expect(accepts(bad), bad).toBe(false);
  });

  it("asks KMS only for what Secrets Manager does on the function's behalf: GenerateDataKey and Decrypt, never Encrypt", async () => {
    const kms = statementsOf(await template())
      .flatMap(actionsOf)
      .filter((action) => action.startsWith('kms:'));
    expect(new Set(kms)).toEqual(new Set(['kms:Decrypt', 'kms:GenerateDataKey']));
  });

  it('grants only Secrets Manager actions the function calls', async () => {
    // RotateSecret and CancelRotateSecret are keyroll aws enable/disable-rotation's, run by a person, never by the function.
    // ListSecretVersionIds: preflight counts the secret's young versions against AWS's version quota.
    const called: AwsAction[] = [
      'DescribeSecret',
      'GetSecretValue',
      'ListSecretVersionIds',
      'PutSecretValue',
      'CreateSecret',
      'UpdateSecretVersionStage',
      'TagResource',
    ];
    const granted = statementsOf(await template())
      .flatMap(actionsOf)
      .filter((action) => action.startsWith('secretsmanager:'));
    expect(granted.filter((action) => !called.some((name) => action === `secretsmanager:${name}`))).toEqual(
      [],
    );
  });

  it('lets Secrets Manager invoke the function only from this account and for secrets under the prefix (SourceArn)', async () => {
    const t = await template();
    expect(t.Resources.InvokeBySecretsManager.Properties).toMatchObject({
      Principal: 'secretsmanager.amazonaws.com',
      Action: 'lambda:InvokeFunction',
      SourceAccount: { Ref: 'AWS::AccountId' },
      SourceArn: UNDER_PREFIX,
    });
    // The same secrets the role may rotate.
    expect(statementsOf(t).find((statement) => statement.Sid === 'RotateKeyrollSecrets')?.Resource).toEqual(
      UNDER_PREFIX,
    );
  });
});
