// One replica of bench/ha.ts: `keyroll daemon` (Daemon.start, in this process) with the Lease
// leader election and the shared replay record on the bench's kube-apiserver, as a pod of the
// chart runs it. A process of its own, so the bench can SIGKILL it (a crash: nothing released,
// the Lease left to expire) or SIGTERM it (the daemon's own shutdown: the Lease handed over).
// Started as `node bench/ha-replica.ts <settings file>`; prints one line `{"url": …}` once it
// listens, then its audit trail as JSON lines on stdout (a pipe: written synchronously, so what
// a SIGKILL interrupts was already written).
import { readFile } from 'node:fs/promises';
import { staticCredential } from '../src/api/credentials.ts';
import { createAuditLog } from '../src/audit/logger.ts';
import { Secret } from '../src/audit/secret.ts';
import { Daemon } from '../src/daemon/daemon.ts';
import { KubeLeaseStore } from '../src/leader/kube-lease-store.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../test/support/kube-apiserver.ts';

export interface ReplicaSettings {
  policyFile: string;
  ownerToken: string;
  kube: KubeApiServerInfo;
  namespace: string;
  lease: string;
  replayPrefix: string;
  /** The pod name: the Lease's holderIdentity. */
  identity: string;
  timings: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  checkIntervalMs: number;
  stateDir: string;
  env: Record<string, string>;
}

const settingsFile = process.argv[2];
if (settingsFile === undefined) throw new Error('usage: node bench/ha-replica.ts <settings file> <identity>');
const settings = JSON.parse(await readFile(settingsFile, 'utf8')) as ReplicaSettings;
const identity = process.argv[3] ?? settings.identity;
const kubeConfig = adminKubeConfig(settings.kube);
const audit = createAuditLog({
  destination: {
    write(line: string): void {
      process.stdout.write(line);
    },
  },
});
const daemon = await Daemon.start({
  policyFile: settings.policyFile,
  listen: { host: '127.0.0.1', port: 0 },
  audit,
  checkIntervalMs: settings.checkIntervalMs,
  stateDir: settings.stateDir,
  replayStore: {
    kind: 'kubernetes',
    namespace: settings.namespace,
    prefix: settings.replayPrefix,
    kubeConfig,
  },
  leaderElection: {
    store: new KubeLeaseStore(kubeConfig, { namespace: settings.namespace, name: settings.lease }),
    identity,
    timings: settings.timings,
  },
  env: settings.env,
  runtime: { credentials: staticCredential(new Secret(settings.ownerToken), 'emulator owner token') },
  warn: () => undefined,
});
process.stdout.write(`${JSON.stringify({ url: daemon.url })}\n`);
process.once('SIGTERM', () => {
  void daemon.shutdown('SIGTERM').then((result) => {
    process.exit(result.exitCode);
  });
});
