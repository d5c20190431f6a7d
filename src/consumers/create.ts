// The consumers' refresh of a policy: its settings, the runtime's alerter and webhook notifier,
// and a Kubernetes client made on first use (in-cluster, or the policy's kubeconfig).
import type { Notifier } from '../alerts/public/notify.ts';
import type { Alerter } from '../alerts/public/types.ts';
import { CONSUMER_DEFAULTS, type ConsumerSettings } from '../policy/public/consumers.ts';
import { parseDuration } from '../policy/public/duration.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { KubeClient } from './kubernetes/client.ts';
import { loadKubeConfig, NodeKubeClient } from './kubernetes/node-client.ts';
import { ConsumerRefresher } from './refresher.ts';
import type { ConsumerObserver } from './types.ts';

export interface RefresherDeps {
  alerter: Alerter;
  notifier: Notifier;
  env?: NodeJS.ProcessEnv;
  now?: () => Date;
  observer?: ConsumerObserver;
  signal?: AbortSignal;
  /** Replaces the client the policy describes (tests). */
  kubeClient?: () => KubeClient;
}

export const DEFAULT_CONSUMER_SETTINGS: Readonly<ConsumerSettings> = Object.freeze({
  kubernetes: {},
  syncTimeoutMs: parseDuration(CONSUMER_DEFAULTS.syncTimeout),
  rolloutTimeoutMs: parseDuration(CONSUMER_DEFAULTS.rolloutTimeout),
  reloaderTimeoutMs: parseDuration(CONSUMER_DEFAULTS.reloaderTimeout),
  maxConcurrentRestarts: CONSUMER_DEFAULTS.maxConcurrentRestarts,
});

export function createRefresher(policy: Pick<Policy, 'consumers'>, deps: RefresherDeps): ConsumerRefresher {
  const settings = policy.consumers ?? DEFAULT_CONSUMER_SETTINGS;
  return new ConsumerRefresher({
    settings,
    kubeClient: deps.kubeClient ?? (() => new NodeKubeClient(loadKubeConfig(settings.kubernetes, deps.env))),
    notifier: deps.notifier,
    alerter: deps.alerter,
    ...(deps.now ? { now: deps.now } : {}),
    ...(deps.observer ? { observer: deps.observer } : {}),
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
}
