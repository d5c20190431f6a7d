import type { Command } from 'commander';
import { addPolicyOption, createStdoutAudit, exitForError, loadPolicyOrExit, UsageError } from './common.ts';

interface DaemonFlags {
  policy: string;
  listen: string;
  grace: string;
  triggerSecret?: string;
  checkInterval: string;
  retryFailed: string;
  concurrency: string;
}

const DAEMON_HELP = `
Endpoints:
  GET  /healthz        200 while the process runs
  GET  /readyz         200 once the policy is loaded and every destination passed preflight
  GET  /metrics        Prometheus text (docs/metrics.md)
  POST /v1/rotations   signed trigger for leak responders (docs/daemon.md)

Signals:
  SIGHUP           reload the policy (an invalid one keeps the current policy and alerts)
  SIGTERM, SIGINT  stop scheduling, let rolled keys finish their store, exit within --grace

Exit codes:
  0  stopped cleanly: every in-flight rotation finished
  2  usage or configuration error at start (nothing was touched)
  3  the grace expired with rotations in flight (their intent markers make the next run repair them)`;

export function registerDaemonCommand(program: Command): void {
  const command = program
    .command('daemon')
    .description('Run as a long-lived service: rotate keys on their schedules (croner) and by age, serve health, readiness, metrics and a signed trigger endpoint. Prints the audit trail as JSON lines.')
    .option('--listen <host:port>', 'address of the HTTP server; env KEYROLL_LISTEN', process.env.KEYROLL_LISTEN ?? '0.0.0.0:8080')
    .option('--grace <duration>', 'on SIGTERM/SIGINT, how long in-flight rotations may take to finish', '30s')
    .option('--trigger-secret <ref>', 'env:NAME or file:/path holding the HMAC secret of POST /v1/rotations (disabled without it); env KEYROLL_TRIGGER_SECRET', process.env.KEYROLL_TRIGGER_SECRET)
    .option('--check-interval <duration>', "how often every key's state is read (age-based keys, leftover intents, missed slots)", '5m')
    .option('--retry-failed <duration>', 'how long the sweep waits before retrying a key whose rotation failed', '1h')
    .option('--concurrency <n>', 'keys rotated at once per run', '4')
    .addHelpText('after', DAEMON_HELP);
  addPolicyOption(command).action(async (flags: DaemonFlags) => {
    process.exitCode = await daemonCommand(flags);
  });
}

async function daemonCommand(flags: DaemonFlags): Promise<number> {
  const [{ startDaemon }, { parseListenAddress }, { createMetrics, collectDefaultMetrics }, { parseDuration }, { SecretRef }] = await Promise.all([
    import('../scheduler/daemon.ts'),
    import('../scheduler/server.ts'),
    import('../metrics/metrics.ts'),
    import('../policy/duration.ts'),
    import('../policy/refs.ts'),
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
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency ${JSON.stringify(flags.concurrency)} must be a whole number of at least 1`);
    if (flags.triggerSecret !== undefined && !SecretRef.safeParse(flags.triggerSecret).success) {
      throw new UsageError('--trigger-secret must be a reference like env:NAME or file:/absolute/path, never the secret itself');
    }
    settings = {
      listen: parseListenAddress(flags.listen),
      graceMs: duration('--grace', flags.grace),
      checkIntervalMs: duration('--check-interval', flags.checkInterval),
      retryFailedAfterMs: duration('--retry-failed', flags.retryFailed),
      concurrency,
    };
    policy = await loadPolicyOrExit(flags.policy);
  } catch (error) {
    return exitForError(error);
  }

  const audit = createStdoutAudit();
  const metrics = createMetrics();
  collectDefaultMetrics({ register: metrics.registry });
  let daemon;
  try {
    daemon = await startDaemon({ ...settings, policyFile: flags.policy, policy, audit, metrics, ...(flags.triggerSecret ? { triggerSecretRef: flags.triggerSecret } : {}) });
  } catch (error) {
    return exitForError(error);
  }
  process.stderr.write(`keyroll daemon: serving on ${daemon.url} (policy ${flags.policy})\n`);

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
        process.stderr.write(`keyroll: ${name} received again; still waiting for in-flight stores (at most ${flags.grace})\n`);
        return;
      }
      stopping = true;
      process.stderr.write(`keyroll: ${name} received; no new rotations, finishing in-flight stores (at most ${flags.grace})\n`);
      void running.shutdown(name).then((result) => {
        resolve(result.exitCode);
      });
    };
    process.on('SIGTERM', () => {
      onStop('SIGTERM');
    });
    process.on('SIGINT', () => {
      onStop('SIGINT');
    });
  });
  process.off('SIGHUP', onHangUp);
  await audit.flush();
  // Exit now: when the grace expired, in-flight work would otherwise keep the process alive,
  // and a clean stop has nothing left to wait for.
  process.exit(exitCode);
}
