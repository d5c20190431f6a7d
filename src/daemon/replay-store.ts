// --replay-store: where the signed endpoints' replay records live. `file` (the default) keeps them
// in --state-dir, which only this daemon reads; `kubernetes:NAMESPACE/PREFIX` keeps them in the
// ConfigMaps PREFIX-trigger, PREFIX-github and PREFIX-gitguardian of NAMESPACE, which every
// replica reads and writes (inbound/kube-replay-record.ts), through the pod's service account (or
// the kubeconfig outside a pod). The chart renders those ConfigMaps and a Role limited to them.
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../consumers/public/kubernetes/node-client.ts';
import { UsageError } from '../errors.ts';
import { REPLAY_SOURCES, replayConfigMapName } from '../inbound/public/replay-records.ts';

export interface SharedReplayStore {
  kind: 'kubernetes';
  namespace: string;
  prefix: string;
  kubeConfig: KubeConfig;
}

/** An RFC 1123 label: what a namespace name is. */
const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** An RFC 1123 subdomain: what a ConfigMap name is. */
const SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The shared store `text` names, or undefined for `file`. Throws UsageError on anything else, and
 * ConsumerError KR_CONSUMER_NO_CLIENT when no Kubernetes client configuration can be loaded.
 */
export function parseReplayStore(
  text: string,
  env: NodeJS.ProcessEnv = process.env,
  load: (env: NodeJS.ProcessEnv) => KubeConfig = (e) => loadKubeConfig({}, e),
): SharedReplayStore | undefined {
  if (text === 'file') return undefined;
  const match = /^kubernetes:([^/]+)\/(.+)$/.exec(text);
  const namespace = match?.[1];
  const prefix = match?.[2];
  if (namespace === undefined || prefix === undefined) {
    throw new UsageError(
      `--replay-store ${JSON.stringify(text)} must be file or kubernetes:NAMESPACE/PREFIX (e.g. kubernetes:keyroll/keyroll-replay)`,
    );
  }
  if (!LABEL.test(namespace))
    throw new UsageError(`--replay-store: ${JSON.stringify(namespace)} is not a namespace name`);
  for (const source of REPLAY_SOURCES) {
    const name = replayConfigMapName(prefix, source);
    if (!SUBDOMAIN.test(name))
      throw new UsageError(
        `--replay-store: ${JSON.stringify(name)} is not a ConfigMap name (lowercase letters, digits, - and .)`,
      );
  }
  return { kind: 'kubernetes', namespace, prefix, kubeConfig: load(env) };
}
