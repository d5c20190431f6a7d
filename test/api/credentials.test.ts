import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { refCredential, staticCredential } from '../../src/api/credentials.ts';
import { ApiError } from '../../src/api/errors.ts';
import { Secret } from '../../src/audit/secret.ts';
import { RefError } from '../../src/refs/secret-ref.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { mockApi } from './mock-api.ts';

const dir = useTempDir('keyroll-cred-');

describe('staticCredential', () => {
  it('hands out the same Secret and describes itself without the value', async () => {
    const value = new Secret('static-token-value-123');
    const provider = staticCredential(value, 'bootstrap token');
    expect(await provider.token()).toBe(value);
    expect(provider.description).toBe('bootstrap token');
  });
});

describe('refCredential', () => {
  it('re-reads a file reference on every call so a rotated Kubernetes token is picked up', async () => {
    const path = join(dir.path(), 'token');
    await writeFile(path, 'first-mounted-token\n');
    const provider = refCredential(`file:${path}`);
    expect((await provider.token()).reveal()).toBe('first-mounted-token');
    await writeFile(path, 'second-mounted-token\n');
    expect((await provider.token()).reveal()).toBe('second-mounted-token');
  });

  it('describes itself by the reference', () => {
    expect(refCredential('env:KEYROLL_TOKEN').description).toBe('env:KEYROLL_TOKEN');
  });

  it('names the reference, not a value, when the file cannot be read', async () => {
    const ref = `file:${join(dir.path(), 'missing')}`;
    const error = await refCredential(ref)
      .token()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RefError);
    expect((error as RefError).ref).toBe(ref);
    expect((error as RefError).message).toContain(ref);
  });
});

describe('ApiClient with an unreadable credential', () => {
  it('fails with KR_API_CREDENTIAL_UNAVAILABLE naming the reference, before any request', async () => {
    const ref = `file:${join(dir.path(), 'gone')}`;
    const api = mockApi({ credentials: refCredential(ref) });
    const error = await api.client.listProjects({ limit: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe('KR_API_CREDENTIAL_UNAVAILABLE');
    expect((error as ApiError).message).toContain(ref);
    expect((error as ApiError).outcomeUnknown).toBe(false);
    expect((error as ApiError).cause).toBeInstanceOf(RefError);
    await api.done();
  });

  it('sends the file content that is current at call time as the bearer', async () => {
    const path = join(dir.path(), 'token');
    await writeFile(path, 'rotated-bearer-token-a');
    const api = mockApi({ credentials: refCredential(`file:${path}`) });
    const page = { success: true, data: [], pagination: { nextCursor: null, hasMore: false } };
    api.pool
      .intercept({
        path: '/v1/projects?limit=1',
        method: 'GET',
        headers: { authorization: 'Bearer rotated-bearer-token-a' },
      })
      .reply(200, page, { headers: { 'content-type': 'application/json' } });
    api.pool
      .intercept({
        path: '/v1/projects?limit=1',
        method: 'GET',
        headers: { authorization: 'Bearer rotated-bearer-token-b' },
      })
      .reply(200, page, { headers: { 'content-type': 'application/json' } });
    await api.client.listProjects({ limit: 1 });
    await writeFile(path, 'rotated-bearer-token-b');
    await api.client.listProjects({ limit: 1 });
    await api.done();
  });
});
