// custom_metadata changes (kv.ts updateCustomMetadata) against loopback stand-ins for the two
// servers: OpenBao, which checks-and-sets metadata writes, and HashiCorp Vault, which ignores
// `metadata_cas`. Where the server checks, a change may start from what this process knew; where
// it cannot, every change reads first. (The real OpenBao: test/integration/vault-requests.test.ts.)
import { createServer, type Server } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { VaultTokenSource } from '../../../src/backends/vault/auth.ts';
import { VaultClient } from '../../../src/backends/vault/client.ts';
import { KvV2, VaultSession, type KvMetadata } from '../../../src/backends/vault/kv.ts';

interface StandIn {
  /** `METHOD /v1/path` of each request, with the metadata_cas a write carried. */
  seen: string[];
  /** What the stand-in stores: custom_metadata and OpenBao's metadata version. */
  custom: Record<string, string>;
  metadataVersion: number;
}

let server: Server;
let address: string;
let state: StandIn;
let checksAndSets: boolean;

beforeEach(async () => {
  state = { seen: [], custom: {}, metadataVersion: 0 };
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/v1/auth/token/lookup-self') {
        res.end(JSON.stringify({ data: { ttl: 0, policies: ['root'] } }));
        return;
      }
      if (req.method === 'GET') {
        state.seen.push(`GET ${req.url ?? ''}`);
        res.end(
          JSON.stringify({
            data: {
              current_version: 1,
              ...(checksAndSets ? { current_metadata_version: state.metadataVersion } : {}),
              custom_metadata: state.custom,
              versions: { '1': { deletion_time: '', destroyed: false } },
            },
          }),
        );
        return;
      }
      const write = JSON.parse(body) as { custom_metadata: Record<string, string>; metadata_cas?: number };
      state.seen.push(`POST ${req.url ?? ''} cas=${String(write.metadata_cas)}`);
      if (checksAndSets && write.metadata_cas !== state.metadataVersion) {
        res.statusCode = 400;
        res.end(
          JSON.stringify({ errors: ['metadata check-and-set parameter does not match the current version'] }),
        );
        return;
      }
      state.custom = write.custom_metadata;
      state.metadataVersion += 1;
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `http://127.0.0.1:${String((server.address() as { port: number }).port)}`;
});
afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function kv(): KvV2 {
  const client = new VaultClient({ backend: 'vault-unit', address, timeoutMs: 5_000 });
  const tokens = new VaultTokenSource({
    client,
    auth: { method: 'token', token: 'env:T' },
    backend: 'vault-unit',
    now: () => new Date(),
    env: { T: 'hvs.unit-test-token-0001' },
  });
  return new KvV2(new VaultSession(client, tokens), 'secret');
}

const METADATA = '/v1/secret/metadata/app';
const setIntent = (): Record<string, string> => ({ keyroll_intent: '{"rotationId":"r1"}' });

describe('custom_metadata changes on OpenBao (metadata check-and-set)', () => {
  beforeEach(() => {
    checksAndSets = true;
  });

  it('starts from what it knew: one write, checked against the version it knew, and says which version it left', async () => {
    const store = kv();
    const known = await store.readMetadata('app', 'lock');
    state.seen = [];
    const after = await store.updateCustomMetadata('app', setIntent, 'intent', { metadata: known });
    expect(state.seen).toEqual([`POST ${METADATA} cas=0`]);
    expect(after.metadata).toMatchObject({ metadataVersion: 1, customMetadata: setIntent() });
    // The next change starts from that, and the server agrees.
    await store.updateCustomMetadata('app', () => ({ keyroll_intent: null }), 'record', after);
    expect(state.seen).toEqual([`POST ${METADATA} cas=0`, `POST ${METADATA} cas=1`]);
    expect(state.custom).toEqual({});
  });

  it("reads and writes again when what it knew is out of date, keeping the other writer's keys", async () => {
    const store = kv();
    const known = await store.readMetadata('app', 'lock');
    state.custom = { team: 'billing' };
    state.metadataVersion = 1; // someone else wrote meanwhile
    state.seen = [];
    await store.updateCustomMetadata('app', setIntent, 'intent', { metadata: known });
    expect(state.seen).toEqual([`POST ${METADATA} cas=0`, `GET ${METADATA}`, `POST ${METADATA} cas=1`]);
    expect(state.custom).toEqual({ team: 'billing', ...setIntent() });
  });

  it('reads first while it does not know whether the server checks (no metadata read yet)', async () => {
    const store = kv();
    await store.updateCustomMetadata('app', setIntent, 'intent', { metadata: undefined });
    expect(state.seen).toEqual([`GET ${METADATA}`, `POST ${METADATA} cas=0`]);
  });
});

describe('custom_metadata changes on HashiCorp Vault (no metadata check-and-set)', () => {
  beforeEach(() => {
    checksAndSets = false;
  });

  it('reads before every write, whatever it knew, and claims no metadata version', async () => {
    const store = kv();
    const known: KvMetadata | undefined = await store.readMetadata('app', 'lock');
    state.custom = { team: 'billing' }; // written meanwhile: a write from `known` would drop it
    state.seen = [];
    const after = await store.updateCustomMetadata('app', setIntent, 'intent', { metadata: known });
    expect(state.seen).toEqual([`GET ${METADATA}`, `POST ${METADATA} cas=undefined`]);
    expect(state.custom).toEqual({ team: 'billing', ...setIntent() });
    expect(after.metadata?.metadataVersion).toBeUndefined();
    await store.updateCustomMetadata('app', () => ({ keyroll_intent: null }), 'record', after);
    expect(state.seen.slice(2)).toEqual([`GET ${METADATA}`, `POST ${METADATA} cas=undefined`]);
  });

  it('reads first for a path that had no metadata too', async () => {
    const store = kv();
    await store.readMetadata('app', 'lock'); // the server is known not to check
    state.seen = [];
    await store.updateCustomMetadata('app', setIntent, 'intent', { metadata: undefined });
    expect(state.seen).toEqual([`GET ${METADATA}`, `POST ${METADATA} cas=undefined`]);
  });
});
