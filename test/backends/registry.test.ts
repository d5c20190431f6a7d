import { describe, expect, it } from 'vitest';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import { backendFactories, createBackend } from '../../src/backends/registry.ts';
import { createTempDir } from '../support/temp-dir.ts';

describe('backend registry', () => {
  it('has a loader for every backend kind', () => {
    expect(Object.keys(backendFactories).sort()).toEqual(['aws', 'file', 'vault']);
  });

  it('builds a file backend under the policy name', async () => {
    const directory = await createTempDir('keyroll-registry-');
    try {
      const backend = await createBackend('local', { kind: 'file', directory: directory.path });
      expect(backend).toMatchObject({ kind: 'file', name: 'local' });
      await backend.close();
    } finally {
      await directory.remove();
    }
  });

  it('builds a vault backend without contacting the server', async () => {
    const backend = await createBackend('vault-prod', {
      kind: 'vault',
      address: 'http://127.0.0.1:1',
      mount: 'secret',
      timeoutMs: 1000,
      auth: { method: 'token', token: 'env:VAULT_TOKEN' },
    });
    expect(backend).toMatchObject({ kind: 'vault', name: 'vault-prod' });
    await backend.close();
  });

  it('offers native rotation as an optional port: the aws backend has it, vault and file have none', async () => {
    const directory = await createTempDir('keyroll-registry-');
    const aws = await createBackend('aws-prod', AwsBackendConfig.parse({ kind: 'aws', region: 'eu-west-1' }));
    const vault = await createBackend('vault-prod', {
      kind: 'vault',
      address: 'http://127.0.0.1:1',
      mount: 'secret',
      timeoutMs: 1000,
      auth: { method: 'token', token: 'env:VAULT_TOKEN' },
    });
    const file = await createBackend('local', { kind: 'file', directory: directory.path });
    try {
      // The lambda and `keyroll aws enable-rotation` ask the port; neither knows the AWS class.
      expect(typeof aws.native?.pendingDestination).toBe('function');
      expect(typeof aws.native?.enable).toBe('function');
      expect(vault.native).toBeUndefined();
      expect(file.native).toBeUndefined();
    } finally {
      await Promise.all([aws.close(), vault.close(), file.close()]);
      await directory.remove();
    }
  });
});
