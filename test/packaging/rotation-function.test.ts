// The AWS-native rotation function's artifact (`npm run build`: dist/keyroll-aws-rotation.zip,
// scripts/build-rotation-function.ts): one index.mjs that runs with no node_modules anywhere, as in
// Lambda, and exports the handler the CloudFormation template names (index.handler).
import { spawnSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unzipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { parse, type Tags } from 'yaml';
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
    const script = "const { handler } = await import('./index.mjs'); try { await handler({ Step: 'createSecret' }); } catch (e) { process.stdout.write(String(e.code)); }";
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: run, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
    expect(child.stderr).toBe('');
    expect(child.stdout).toBe('KR_NATIVE_EVENT_INVALID');
  }, 120_000);

  it('the CloudFormation template names the handler, the Node 24 runtime and the zip', async () => {
    const template = await readFile(new URL('../../deploy/aws-native-rotation.yaml', import.meta.url), 'utf8');
    expect(template).toContain('Handler: index.handler');
    expect(template).toContain('Runtime: nodejs24.x');
    expect(template).toContain('Principal: secretsmanager.amazonaws.com');
    expect(template).toContain('keyroll-aws-rotation.zip');
  });
});

// CloudFormation's short forms (!Ref, !Sub, ...) read as their long forms ({ Ref: ... }).
const CFN_TAGS: Tags = ['Ref', 'Sub', 'GetAtt', 'If', 'Not', 'Equals'].flatMap((name) => [
  { tag: `!${name}`, resolve: (value: string) => ({ [name === 'Ref' ? 'Ref' : `Fn::${name}`]: value }) },
  { tag: `!${name}`, collection: 'seq' as const, resolve: (value: unknown) => ({ [`Fn::${name}`]: (value as { toJSON: () => unknown }).toJSON() }) },
]);

interface Statement { Sid?: string; Action: string | string[]; Resource: unknown }

describe("keyroll's own API credential in the CloudFormation template", () => {
  it('is never resolved into the function\'s configuration: only its ARN is, and the role may read exactly that secret', async () => {
    const text = await readFile(new URL('../../deploy/aws-native-rotation.yaml', import.meta.url), 'utf8');
    expect(text).not.toContain('{{resolve:');
    const template = parse(text, { customTags: CFN_TAGS }) as {
      Resources: {
        Function: { Properties: { Environment: { Variables: Record<string, unknown> } } };
        Role: { Properties: { Policies: { PolicyDocument: { Statement: (Statement | { 'Fn::If': unknown })[] } }[] } };
      };
    };
    const variables = template.Resources.Function.Properties.Environment.Variables;
    expect(variables.KEYROLL_API_TOKEN).toBeUndefined();
    expect(variables.KEYROLL_API_TOKEN_SECRET_ARN).toEqual({ Ref: 'ApiCredentialSecretArn' });
    const statements = template.Resources.Role.Properties.Policies.flatMap((policy) => policy.PolicyDocument.Statement).filter((statement): statement is Statement => 'Action' in statement);
    const reads = statements.find((statement) => statement.Sid === 'ReadOwnApiCredential');
    expect(reads).toMatchObject({ Action: 'secretsmanager:GetSecretValue', Resource: { Ref: 'ApiCredentialSecretArn' } });
  });
});
