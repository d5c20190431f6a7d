import { homedir } from 'node:os';
import { printableLines } from '../audit/public/printable.ts';
import { join } from 'node:path';
import { Option, type Command } from 'commander';
import {
  addPolicyOption,
  createStdoutAudit,
  exitForError,
  loadPolicyOrExit,
  testCheckpointFromEnv,
} from './common.ts';
import { errorMessage, UsageError } from '../errors.ts';
import { startTracing } from '../tracing/public/start.ts';
import { addKeysFromOptions, keysFromOf, serviceAccountNamespace, type KeysFromFlags } from './keys-from.ts';

interface DaemonFlags extends KeysFromFlags {
  policy: string;
  listen: string;
  grace: string;
  triggerKey: string[];
  triggerSecret?: string;
  stateDir: string;
  replayStore: string;
  metricsToken?: string;
  checkInterval: string;
  retryFailed: string;
  concurrency: string;
  leaderLease?: string;
  leaderLeaseNamespace?: string;
  leaderIdentity?: string;
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
}

/** This machine only: the endpoints are for whoever the operator lets in. The chart sets 0.0.0.0 for its pod. */
export const DEFAULT_LISTEN = '127.0.0.1:8080';

/** Where the trigger's replay record lives unless --state-dir says otherwise (XDG base directories). */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KEYROLL_STATE_DIR) return env.KEYROLL_STATE_DIR;
  const stateHome = env.XDG_STATE_HOME ? env.XDG_STATE_HOME : join(env.HOME ?? homedir(), '.local', 'state');
  return join(stateHome, 'keyroll');
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

const DAEMON_HELP = `
Endpoints:
  GET  /healthz        200 while the process runs
  GET  /readyz         200 {"status":"ok"} once every destination passed preflight, else 503 (reasons in the audit)
  GET  /metrics        Prometheus text (docs/metrics.md); per-key series only with --metrics-token
  POST /v1/rotations   trigger for leak responders, signed with the caller's --trigger-key (docs/daemon.md)

Keys from keyroll.io objects (--keys-from kubernetes, docs/crds.md):
  RotatedKeys, KeyStores, ClusterKeyStores and the ClusterKeyApi are watched; every change (1 s
  quiet, at most 5 s) builds the policy again and swaps it in as SIGHUP does. --policy then names
  the settings every key shares: version, keyApi, alerts, escrow, intake, consumers.

Signals:
  SIGHUP           reload the policy (an invalid one keeps the current policy and alerts)
  SIGTERM, SIGINT  stop scheduling, let rolled keys finish their store, exit within --grace

Exit codes:
  0  stopped cleanly: every in-flight rotation finished
  2  usage or configuration error at start (nothing was touched)
  3  the grace expired with rotations in flight (their intent markers make the next run repair them)`;

// eslint-disable-next-line max-lines-per-function -- the daemon's flags, one option per line: a table, not logic
export function registerDaemonCommand(program: Command): void {
  const command = program
    .command('daemon')
    .description(
      'Run as a long-lived service: rotate keys on their schedules (croner) and by age, serve health, readiness, metrics and a signed trigger endpoint. Prints the audit trail as JSON lines.',
    )
    .option(
      '--listen <host:port>',
      'address of the HTTP server (0.0.0.0:8080 for every interface); env KEYROLL_LISTEN',
      process.env.KEYROLL_LISTEN ?? DEFAULT_LISTEN,
    )
    .option('--grace <duration>', 'on SIGTERM/SIGINT, how long in-flight rotations may take to finish', '30s')
    .option(
      '--trigger-key <name=ref>',
      "a caller of POST /v1/rotations and its HMAC key (env:NAME or file:/path); repeat for each caller; the caller's name is the audit's actor (disabled without any); env KEYROLL_TRIGGER_KEYS (comma-separated)",
      collect,
      (process.env.KEYROLL_TRIGGER_KEYS ?? '')
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
    )
    .option(
      '--state-dir <dir>',
      'where the trigger keeps its replay record; env KEYROLL_STATE_DIR',
      defaultStateDir(),
    )
    .option(
      '--replay-store <where>',
      'file: the replay records in --state-dir (one daemon); kubernetes:NAMESPACE/PREFIX: ConfigMaps PREFIX-trigger, PREFIX-github, PREFIX-gitguardian shared by every replica (in-cluster account or kubeconfig); env KEYROLL_REPLAY_STORE',
      process.env.KEYROLL_REPLAY_STORE ?? 'file',
    )
    .option(
      '--metrics-token <ref>',
      'env:NAME or file:/path of a bearer token; /metrics serves per-key series only to a scraper sending it; env KEYROLL_METRICS_TOKEN',
      process.env.KEYROLL_METRICS_TOKEN,
    )
    // Replaced by --trigger-key: kept only to refuse it with a pointer instead of "unknown option".
    .addOption(new Option('--trigger-secret <ref>').hideHelp())
    .option(
      '--check-interval <duration>',
      "how often every key's state is read (age-based keys, leftover intents, missed slots)",
      '5m',
    )
    .option(
      '--retry-failed <duration>',
      'how long the sweep waits before retrying a key whose rotation failed',
      '1h',
    )
    .option('--concurrency <n>', 'keys rotated at once per run', '4')
    .option(
      '--leader-lease <name>',
      'run as one of several replicas: schedules, sweeps, drift probes, owed restarts and the leak reconcile run only on the holder of this coordination.k8s.io/v1 Lease (every replica answers webhooks and the trigger); off by default; env KEYROLL_LEADER_LEASE',
      process.env.KEYROLL_LEADER_LEASE,
    )
    .option(
      '--leader-lease-namespace <ns>',
      "the Lease's namespace; default env POD_NAMESPACE, else the pod's own namespace",
      process.env.POD_NAMESPACE,
    )
    .option(
      '--leader-identity <name>',
      "this replica's name in the Lease; default env POD_NAME, else HOSTNAME",
      process.env.POD_NAME ?? process.env.HOSTNAME,
    )
    .option(
      '--lease-duration <duration>',
      'how long the other replicas wait, from the last renew they saw, before taking the Lease over (whole seconds)',
      '15s',
    )
    .option(
      '--renew-deadline <duration>',
      'how long the leader keeps leading without a successful renew; shorter than --lease-duration',
      '10s',
    )
    .option(
      '--retry-period <duration>',
      'how often every replica reads, and the leader renews, the Lease',
      '2s',
    )
    .addHelpText('after', DAEMON_HELP);
  addKeysFromOptions(command);
  addPolicyOption(command).action(async (flags: DaemonFlags) => {
    process.exitCode = await daemonCommand(flags);
  });
}

// eslint-disable-next-line max-lines-per-function -- a linear command (flags, settings, start, wait for a signal, exit) whose signal handlers share its locals
async function daemonCommand(flags: DaemonFlags): Promise<number> {
  const [
    { Daemon },
    { parseListenAddress },
    { parseTriggerKeys },
    { createMetrics, collectDefaultMetrics },
    { parseDuration },
    { SecretRef },
    { parseReplayStore },
  ] = await Promise.all([
    import('../daemon/public/daemon.ts'),
    import('../daemon/public/server.ts'),
    import('../scheduler/public/trigger-keys.ts'),
    import('../metrics/public/metrics.ts'),
    import('../policy/public/duration.ts'),
    import('../refs/public/secret-ref.ts'),
    import('../daemon/public/replay-store.ts'),
  ]);
  const duration = (flag: string, text: string): number => {
    try {
      return parseDuration(text);
    } catch (error) {
      throw new UsageError(`${flag}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  let settings;
  let policy;
  try {
    const concurrency = Number(flags.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new UsageError(
        `--concurrency ${JSON.stringify(flags.concurrency)} must be a whole number of at least 1`,
      );
    if (flags.triggerSecret !== undefined || process.env.KEYROLL_TRIGGER_SECRET !== undefined) {
      // A silently ignored shared secret would leave the trigger off (404) during a leak.
      throw new UsageError(
        '--trigger-secret and KEYROLL_TRIGGER_SECRET were replaced by --trigger-key NAME=REF (one key per caller; the signature now covers a nonce): see docs/daemon.md',
      );
    }
    if (flags.metricsToken !== undefined && !SecretRef.safeParse(flags.metricsToken).success) {
      throw new UsageError(
        '--metrics-token must be a reference like env:NAME or file:/absolute/path, never the token itself',
      );
    }
    const triggerKeys = parseTriggerKeys(flags.triggerKey);
    const replayStore = parseReplayStore(flags.replayStore);
    const leaderElection = await leaderElectionOf(flags, duration);
    const keysFrom = await keysFromOf(flags);
    settings = {
      ...(keysFrom ? { keysFrom } : {}),
      ...(leaderElection ? { leaderElection } : {}),
      listen: parseListenAddress(flags.listen),
      // The leak endpoints of a policy `intake` need the replay record too; the daemon opens it only then.
      ...(triggerKeys.length > 0 ? { triggerKeys } : {}),
      stateDir: flags.stateDir,
      ...(replayStore === undefined ? {} : { replayStore }),
      ...(flags.metricsToken ? { metricsTokenRef: flags.metricsToken } : {}),
      graceMs: duration('--grace', flags.grace),
      checkIntervalMs: duration('--check-interval', flags.checkInterval),
      retryFailedAfterMs: duration('--retry-failed', flags.retryFailed),
      concurrency,
    };
    // With keys from objects the file holds the shared settings only; the daemon reads it itself.
    policy = keysFrom === undefined ? await loadPolicyOrExit(flags.policy) : undefined;
  } catch (error) {
    return exitForError(error);
  }

  // Signals are caught before the daemon starts: `daemon.started` is written while it starts, and a
  // SIGTERM that follows at once must stop it cleanly, not kill it with Node's default action.
  let onSignal = (name: string): void => {
    pendingStop ??= name;
  };
  let pendingStop: string | undefined;
  process.on('SIGTERM', () => {
    onSignal('SIGTERM');
  });
  process.on('SIGINT', () => {
    onSignal('SIGINT');
  });
  const audit = createStdoutAudit();
  const metrics = createMetrics();
  collectDefaultMetrics({ register: metrics.registry });
  // Each run of the daemon is a trace of its own when the OTEL_* variables ask (docs/tracing.md).
  const tracing = await startTracing(process.env, {
    warn: (line) => {
      process.stderr.write(`keyroll: ${printableLines(line)}\n`);
    },
  });
  let daemon;
  try {
    // The crash tests' pause points (KEYROLL_TEST_PAUSE_AT), as `run` and `rotate` honour them:
    // the fault suite SIGKILLs daemon replicas mid-work (test/faults/leader-kill.test.ts, replica-accept-kill.test.ts).
    const checkpoint = testCheckpointFromEnv();
    const holderProver = await holderProverOf(process.env);
    daemon = await Daemon.start({
      ...settings,
      policyFile: flags.policy,
      ...(policy === undefined ? {} : { policy }),
      audit,
      metrics,
      runtime: { ...(checkpoint ? { checkpoint } : {}), ...(holderProver ? { holderProver } : {}) },
    });
  } catch (error) {
    await tracing?.shutdown();
    return exitForError(error);
  }
  process.stderr.write(
    `keyroll daemon: serving on ${daemon.url} (${flags.keysFrom === 'kubernetes' ? 'keys from keyroll.io objects, settings' : 'policy'} ${flags.policy})\n`,
  );

  const running = daemon;
  const onHangUp = (): void => {
    process.stderr.write('keyroll: SIGHUP received; reloading the policy\n');
    void running.reload();
  };
  process.on('SIGHUP', onHangUp);
  const exitCode = await new Promise<number>((resolve) => {
    let stopping = false;
    const onStop = (name: string): void => {
      if (stopping) {
        // A second signal does not cut a store short; Kubernetes' SIGKILL after its own grace does.
        process.stderr.write(
          `keyroll: ${name} received again; still waiting for in-flight stores (at most ${flags.grace})\n`,
        );
        return;
      }
      stopping = true;
      process.stderr.write(
        `keyroll: ${name} received; no new rotations, finishing in-flight stores (at most ${flags.grace})\n`,
      );
      void running.shutdown(name).then((result) => {
        resolve(result.exitCode);
      });
    };
    onSignal = onStop;
    if (pendingStop !== undefined) onStop(pendingStop);
  });
  process.off('SIGHUP', onHangUp);
  await audit.flush();
  // The spans of the last runs leave before the process does (at most the OTLP timeout).
  await tracing?.shutdown();
  // Exit now: when the grace expired, in-flight work would otherwise keep the process alive,
  // and a clean stop has nothing left to wait for.
  process.exit(exitCode);
}

/**
 * In a pod (POD_NAMESPACE, POD_NAME, POD_UID from the downward API): the prover of dead lock
 * holders, reading pods with the pod's own service account (issue 30; docs/daemon.md, "A replica
 * killed holding a leak's lock"). Outside a pod, or without a client configuration: none, and a
 * dead holder's lock waits for its TTL as before.
 */
async function holderProverOf(
  env: NodeJS.ProcessEnv,
): Promise<import('../rotation/public/types.ts').HolderProver | undefined> {
  const [{ podIdentityOf }, { HolderLiveness, kubePodReader }, { loadKubeConfig }] = await Promise.all([
    import('../rotation/public/lock-owner.ts'),
    import('../leader/public/holder-liveness.ts'),
    import('../consumers/public/kubernetes/node-client.ts'),
  ]);
  if (podIdentityOf(env) === undefined) return undefined;
  try {
    return new HolderLiveness({ readPod: kubePodReader(loadKubeConfig({}, env)) });
  } catch (error) {
    process.stderr.write(
      `keyroll: no Kubernetes client for proving dead lock holders (${printableLines(errorMessage(error))}); their locks wait for their TTL\n`,
    );
    return undefined;
  }
}

/** The Lease settings of --leader-lease; undefined without it (a single daemon leads alone). */
async function leaderElectionOf(
  flags: DaemonFlags,
  duration: (flag: string, text: string) => number,
): Promise<import('../daemon/public/leadership.ts').LeaderElectionOptions | undefined> {
  if (flags.leaderLease === undefined || flags.leaderLease === '') return undefined;
  const [{ checkTimings }, { KubeLeaseStore }, { loadKubeConfig }] = await Promise.all([
    import('../leader/public/elector.ts'),
    import('../leader/public/kube-lease-store.ts'),
    import('../consumers/public/kubernetes/node-client.ts'),
  ]);
  const timings = {
    leaseDurationMs: duration('--lease-duration', flags.leaseDuration),
    renewDeadlineMs: duration('--renew-deadline', flags.renewDeadline),
    retryPeriodMs: duration('--retry-period', flags.retryPeriod),
  };
  const problem = checkTimings(timings);
  if (problem !== undefined)
    throw new UsageError(`--lease-duration, --renew-deadline, --retry-period: ${problem}`);
  const identity = flags.leaderIdentity;
  if (identity === undefined || identity === '')
    throw new UsageError(
      "--leader-lease needs this replica's name: --leader-identity, or env POD_NAME (the chart sets it from the downward API) or HOSTNAME",
    );
  const namespace = flags.leaderLeaseNamespace ?? (await serviceAccountNamespace());
  if (namespace === undefined || namespace === '')
    throw new UsageError(
      "--leader-lease needs the Lease's namespace: --leader-lease-namespace or env POD_NAMESPACE",
    );
  let config;
  try {
    config = loadKubeConfig({});
  } catch (error) {
    throw new UsageError(`--leader-lease: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return { store: new KubeLeaseStore(config, { namespace, name: flags.leaderLease }), identity, timings };
}
