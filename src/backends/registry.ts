// The backend registry: one factory per backend kind, typed so a new kind in BackendKind
// without an entry here fails the type check. Each backend module is imported only when a
// policy uses it: the AWS SDK alone takes longer to load than a whole `keyroll run` of a
// file-backed demo, and a CronJob pays the cold start on every run.
import type { BackendConfig } from './config.ts';
import type { Backend, BackendDeps, BackendFactory, BackendKind } from './types.ts';

/** Loads a kind's factory on first use. */
export type BackendLoader<K extends BackendKind> = () => Promise<BackendFactory<K>>;

export const backendFactories: { [K in BackendKind]: BackendLoader<K> } = {
  aws: async () => (await import('./aws/index.ts')).createAwsBackend,
  vault: async () => (await import('./vault/index.ts')).createVaultBackend,
  file: async () => (await import('./file/index.ts')).createFileBackend,
};

/** Builds the backend instance the policy names `name`. */
export async function createBackend(
  name: string,
  config: BackendConfig,
  deps: BackendDeps = {},
): Promise<Backend> {
  // The cast is safe: the loader is picked by the same `kind` the config carries.
  const factory = await (backendFactories[config.kind] as BackendLoader<BackendKind>)();
  return factory(name, config, deps);
}
