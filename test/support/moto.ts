// The prologue of the tests against moto (AWS Secrets Manager, started by
// test/integration/global-setup.ts): the server, a plain SDK client to look at what keyroll
// stored, and the skip when moto is not there (outside CI only: under CI=true motoServer() fails
// the run instead).
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, describe, it } from 'vitest';
import { sdkClient } from '../integration/aws-fixtures.ts';
import { motoServer, type MotoServer } from '../integration/servers.ts';

export interface Moto {
  server: MotoServer;
  /** A plain SDK client pointed at moto, destroyed after the block's tests (making one does no I/O). */
  sdk: SecretsManagerClient;
}

/**
 * describe(title, body) against moto. Without moto (outside CI only) the block is one skipped test
 * that says so, as the Kubernetes tests do, and body is not called.
 */
export function describeWithMoto(title: string, body: (moto: Moto) => void): void {
  const server = motoServer();
  if (server === undefined) {
    describe.skip(`${title} (moto not available; see the global setup message)`, () => {
      it('needs moto', () => undefined);
    });
    return;
  }
  describe(title, () => {
    const sdk = sdkClient(server);
    afterAll(() => {
      sdk.destroy();
    });
    body({ server, sdk });
  });
}
