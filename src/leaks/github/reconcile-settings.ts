// `intake.github`'s reconcile fields as the daemon uses them: the places to list (organizations,
// repositories, enterprises), the secret types to list, and the interval. Read at start and on
// every reload with the rest of the intake (leaks/settings.ts).
import { parseDuration } from '../../policy/public/duration.ts';
import { reconcileScopes, type GithubIntake } from '../../policy/public/intake.ts';
import type { ListScope } from './list.ts';

export interface GithubReconcileRuntime {
  scopes: ListScope[];
  secretTypes: string[];
  intervalMs: number;
}

/** Undefined when the policy names no place to list (the reconcile is off). */
export function githubReconcileRuntime(github: GithubIntake): GithubReconcileRuntime | undefined {
  if (reconcileScopes(github) === 0 || github.secretTypes === undefined) return undefined;
  const scopes: ListScope[] = [
    ...(github.organizations ?? []).map((org): ListScope => ({ kind: 'organization', org })),
    ...(github.repositories ?? []).map((full): ListScope => {
      const [owner = '', repo = ''] = full.split('/');
      return { kind: 'repository', owner, repo };
    }),
    ...(github.enterprises ?? []).map((enterprise): ListScope => ({ kind: 'enterprise', enterprise })),
  ];
  return {
    scopes,
    secretTypes: [...github.secretTypes],
    intervalMs: parseDuration(github.reconcileInterval),
  };
}
