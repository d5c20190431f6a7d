// What one rotation spends of a backend's request quotas (invariant 11: a quota is a budget), for
// `keyroll plan`'s estimate of an emergency (src/rotation/emergency-estimate.ts). The counts follow
// each store's own request-saving choices, so they are the store folder's to state: AWS's in
// aws/quotas.ts. Vault and file have no quota keyroll knows of and spend nothing here.
import { awsRotationSpend } from './aws/quotas.ts';
import type { BackendConfig } from './config.ts';

/** What the backend is for the key: its primary destination, another destination, or a fallback. */
export type RotationRole = 'primary' | 'destination' | 'fallback';

/** The requests one rotation makes in one budget, and the rate that budget allows this process. */
export interface RotationSpend {
  /** `aws <endpoint or "aws"> <region> <write|tag>`: one account's quota group in one region. */
  budget: string;
  calls: number;
  ratePerSecond: number;
}

export function rotationSpend(
  config: BackendConfig,
  role: RotationRole,
  options: { shards?: number; env?: NodeJS.ProcessEnv } = {},
): RotationSpend[] {
  return config.kind === 'aws' ? awsRotationSpend(config, role, options) : [];
}
