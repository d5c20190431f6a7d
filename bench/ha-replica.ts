// One replica of bench/ha.ts: `keyroll daemon` (Daemon.start, in this process) with the Lease
// leader election and the shared replay record on the bench's kube-apiserver, as a pod of the
// chart runs it. A process of its own, so the bench can SIGKILL it (a crash: nothing released,
// the Lease left to expire) or SIGTERM it (the daemon's own shutdown: the Lease handed over).
// Started as `node bench/ha-replica.ts <settings file>`; prints one line `{"url": …}` once it
// listens, then its audit trail as JSON lines on stdout (a pipe: written synchronously, so what
// a SIGKILL interrupts was already written).
// As the kubelet would, it writes its Pod's status before it starts: the keyroll container running
// since just before this process (test/support/kube-pods.ts; no kubelet runs here), and it gets
// POD_NAMESPACE, POD_NAME and POD_UID as the chart's downward API gives them, so its key locks
// name its pod and another replica can prove it dead once the bench kills it (issue 30).
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { CoreV1Api } from '@kubernetes/client-node';
import { staticCredential } from '../src/api/credentials.ts';
import { createAuditLog } from '../src/audit/logger.ts';
import { Secret } from '../src/audit/secret.ts';
import { Daemon } from '../src/daemon/daemon.ts';
import { HolderLiveness, kubePodReader } from '../src/leader/holder-liveness.ts';
import { KubeLeaseStore } from '../src/leader/kube-lease-store.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../test/support/kube-apiserver.ts';
import { startKeyrollPod } from '../test/support/kube-pods.ts';

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
const uid = await startKeyrollPod(
  kubeConfig.makeApiClient(CoreV1Api),
  settings.namespace,
  identity,
  new Date(performance.timeOrigin - 100),
);
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
  env: { ...settings.env, POD_NAMESPACE: settings.namespace, POD_NAME: identity, POD_UID: uid },
  runtime: {
    credentials: staticCredential(new Secret(settings.ownerToken), 'emulator owner token'),
    holderProver: new HolderLiveness({ readPod: kubePodReader(kubeConfig) }),
  },
  warn: () => undefined,
});
process.stdout.write(`${JSON.stringify({ url: daemon.url })}\n`);
process.once('SIGTERM', () => {
  void daemon.shutdown('SIGTERM').then((result) => {
    process.exit(result.exitCode);
  });
});
