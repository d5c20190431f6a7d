// What `keyroll daemon` is started with (the CLI's flags, or a test's settings), the defaults of
// what is left out, and what a reload and a shutdown answer.
import type { KubeConfig } from '@kubernetes/client-node';
import type { AuditLog } from '../audit/public/events.ts';
import type { KubeClient } from '../consumers/public/kubernetes/client.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import type { LeaderElectionOptions } from './leadership.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { RuntimeOptions } from '../rotation/public/runtime.ts';
import type { TriggerKeySpec } from '../scheduler/public/trigger-keys.ts';
import type { HttpLimits, ListenAddress } from './server.ts';
import type { KeysFromObjects } from './object-keys.ts';

export const DAEMON_DEFAULTS = {
  graceMs: 30_000,
  checkIntervalMs: 5 * 60_000,
  retryFailedAfterMs: 60 * 60_000,
  concurrency: 4,
} as const;

export interface DaemonOptions {
  /**
   * Re-read on every reload (SIGHUP). With keysFrom: the settings every key shares (alerts,
   * escrow, intake, consumers, keyApi: policy/settings-file.ts), not keys.
   */
  policyFile: string;
  /**
   * Take the keys from keyroll.io objects (--keys-from kubernetes; docs/crds.md): a policy built
   * from RotatedKeys, stores and the ClusterKeyApi, swapped in as a reload swaps a file's. `policy` is ignored.
   */
  keysFrom?: KeysFromObjects;
  /** The policy already loaded from policyFile (the CLI validates it before starting); loaded when omitted. */
  policy?: Policy;
  listen: ListenAddress;
  /** How long shutdown waits for in-flight rotations. */
  graceMs?: number;
  /** How often every key's state is read (maxAge keys, leftover intents, missed slots, overdue gauge). */
  checkIntervalMs?: number;
  /** A key whose sweep-started rotation failed is retried by the sweep after this (its schedule still ticks). */
  retryFailedAfterMs?: number;
  concurrency?: number;
  /** One HMAC key per caller (name -> env:NAME or file:/path); without any the trigger answers 404. */
  triggerKeys?: readonly TriggerKeySpec[];
  /** Where the trigger's and the leak endpoints' replay records live (inbound/replay-records.ts); required with triggerKeys or a policy `intake` unless replayStore is given. */
  stateDir?: string;
  /**
   * The replay records shared by every replica (--replay-store kubernetes:NAMESPACE/PREFIX): one
   * ConfigMap per source, `<prefix>-trigger`, `-github`, `-gitguardian`. Replaces the files of stateDir.
   */
  replayStore?: { kind: 'kubernetes'; namespace: string; prefix: string; kubeConfig: KubeConfig };
  /** env:NAME or file:/path of the bearer token that unlocks per-key series on /metrics; without it they are never served. */
  metricsTokenRef?: string;
  /** Connection cap and timeouts of the HTTP server (DEFAULT_HTTP_LIMITS). */
  http?: Partial<HttpLimits>;
  /** Refused triggers audited one by one per minute; the rest are summarized (DEFAULT_REJECTIONS_AUDITED_PER_MINUTE). */
  rejectionsAuditedPerMinute?: number;
  /**
   * Run the work that must run once (schedules, sweeps, drift probes, owed restarts, the leak
   * reconcile) only while holding this Lease; absent: always (one daemon, outside Kubernetes).
   */
  leaderElection?: LeaderElectionOptions;
  audit: AuditLog;
  metrics?: KeyrollMetrics;
  /** Overrides for every runtime the daemon builds (tests: credentials, apiBaseUrl, sleep, alerter, wrapBackend). */
  runtime?: Partial<Omit<RuntimeOptions, 'audit' | 'observer'>>;
  /** The Kubernetes client of the consumers' refresh (tests); default: the policy's (in-cluster or kubeconfig). */
  kubeClient?: () => KubeClient;
  now?: () => Date;
  env?: NodeJS.ProcessEnv;
  /** Where start-up warnings go besides the audit trail (plain-HTTP endpoints); default stderr. */
  warn?: (line: string) => void;
}

export interface ShutdownResult {
  /** 0: every in-flight rotation finished; 3: the grace expired with work in flight. */
  exitCode: 0 | 3;
  /** Keys still rotating when the grace expired. */
  unfinished: string[];
}

export type ReloadResult = { ok: true; keys: number } | { ok: false; errorCode: string; error: string };
