// The Vault / OpenBao KV v2 backend's factory, as the registry loads it (src/backends/README.md).
import type { BackendFactory } from '../types.ts';
import { VaultBackend } from './backend.ts';

export const createVaultBackend: BackendFactory<'vault'> = (name, config, deps) =>
  new VaultBackend(name, config, deps);
