import { z } from 'zod';
import { AwsBackendConfig } from './aws/config.ts';
import { FileBackendConfig } from './file/config.ts';
import { VaultBackendConfig } from './vault/config.ts';

/** The policy's `backends.<name>` entry: one config per backend kind. */
export const BackendConfig = z.discriminatedUnion('kind', [
  AwsBackendConfig,
  VaultBackendConfig,
  FileBackendConfig,
]);
export type BackendConfig = z.infer<typeof BackendConfig>;
