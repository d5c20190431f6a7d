// `keyroll rotate --leaked-secret-stdin`: the responder holds a leaked value, not a key id. The
// value is read on stdin, identified as `keyroll identify` does, the entries that hold it are
// rotated with reason leak (a two-slot entry: the slot the value belongs to), and then the API is
// called with the leaked value to prove it dead (src/leaks/proof.ts). An entry where the value is
// only the previous one, already refused by the API, is not rolled again: the daemon's leak
// intake decides the same way, through the same function (src/leaks/previous-value.ts). Only
// fingerprints are ever printed or audited (invariant 3).
import type { AuditContext, AuditLog } from '../audit/public/events.ts';
import { terminalLine } from '../audit/public/printable.ts';
import { createAuditLog, createNullAuditLog } from '../audit/public/logger.ts';
import type { Secret } from '../audit/public/secret.ts';
import { searchLeakedSecret, type LeakMatch } from '../leaks/public/identify.ts';
import { needsLeakRotation } from '../leaks/public/previous-value.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import { proveLeakDead, type LeakProof } from '../leaks/public/proof.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import type { RunSummary } from '../rotation/public/run.ts';
import { createRuntime, type Runtime } from '../rotation/public/runtime.ts';
import { ExitCode } from './exit-codes.ts';
import { describeMatch, matchJson } from './identify.ts';
import { openAuditFile } from './terminal/audit-file.ts';
import { resolveOutputMode, type OutputFlags } from './terminal/output-mode.ts';

export interface LeakRotation {
  leaked: Secret;
  matches: LeakMatch[];
  /** The entries to rotate: every match but those whose value is already dead. */
  keys: KeyPolicy[];
  /** Two-slot entries: entry id → the slot the leaked value belongs to (the slot to roll). */
  slots: Map<string, string>;
  /** executeRun's onStart: audits `leak.identified` on the run's own output, before the run. */
  announce: (audit: AuditLog) => void;
  /** Filled by `prove` once the rotations ended. */
  proofs: LeakProof[];
  /** executeRun's afterRotations: probes the leaked value for every matched entry. */
  prove: (
    runtime: Runtime,
    summary: RunSummary,
    metrics: KeyrollMetrics | undefined,
  ) => Promise<RunSummary['exitCode'] | undefined>;
  /** Lines for the text report (before the summary line). */
  textLines: () => string[];
  /** The `leak` member of the `-o json` report. */
  json: () => Record<string, unknown>;
}

/**
 * Finds the entries that hold `leaked` (the lookup itself writes no audit line: the run that
 * follows announces what was found). An exit code when there is nothing to rotate, after auditing
 * `leak.unmatched`: 4 when every destination was read and none holds the value, 1 when some
 * could not be read.
 */
export async function identifyForRotation(
  policy: Policy,
  leaked: Secret,
  context: AuditContext,
  output: OutputFlags,
): Promise<LeakRotation | number> {
  const fingerprint = leaked.fingerprint();
  const runtime = await createRuntime(policy, { audit: createNullAuditLog() });
  let search;
  const alreadyDead = new Set<LeakMatch>();
  try {
    search = await searchLeakedSecret(policy, runtime, leaked);
    for (const match of search.matches)
      if (!(await needsLeakRotation(runtime, match, leaked))) alreadyDead.add(match);
  } finally {
    await runtime.close();
  }
  for (const unread of search.unread) {
    process.stderr.write(
      terminalLine`keyroll: could not read ${unread.backend}:${unread.path} of ${unread.keyId} (${unread.errorCode}); the value may be there\n`,
    );
  }
  if (search.matches.length > 0) return leakRotation(leaked, search.matches, alreadyDead, context);
  await auditUnmatched(output, (audit) => {
    audit
      .child(context)
      .emit('leak.unmatched', { fingerprint, searched: search.searched, unread: search.unread });
  });
  process.stderr.write(
    `keyroll: no policy entry holds this value (fingerprint ${fingerprint}); nothing rotated\n`,
  );
  return search.unread.length > 0 ? ExitCode.someFailed : ExitCode.noMatch;
}

/**
 * `leak.unmatched` has no run to ride on: it goes where the run's trail would (JSON lines on a
 * piped stdout or with --log-format json, the --audit-file); a person at a terminal reads the
 * stderr line instead.
 */
async function auditUnmatched(flags: OutputFlags, emit: (audit: AuditLog) => void): Promise<void> {
  const mode = resolveOutputMode(flags, {
    stdoutIsTTY: process.stdout.isTTY,
    stderrIsTTY: process.stderr.isTTY,
    env: process.env,
  });
  const file = mode.auditFile === undefined ? undefined : openAuditFile(mode.auditFile);
  const audit = createAuditLog({
    destination: {
      write(line: string): void {
        file?.write(line);
        if (mode.trail !== 'none') process.stdout.write(line);
      },
    },
  });
  try {
    emit(audit);
    await audit.flush();
  } finally {
    file?.close();
  }
}

function leakRotation(
  leaked: Secret,
  matches: LeakMatch[],
  alreadyDead: ReadonlySet<LeakMatch>,
  context: AuditContext,
): LeakRotation {
  const rotated = matches.filter((match) => !alreadyDead.has(match));
  const slots = new Map<string, string>();
  for (const match of rotated) if (match.slot !== undefined) slots.set(match.key.id, match.slot);
  const proofs: LeakProof[] = [];
  const deadTarget = (keyId: string, slot: string | undefined): string => `${keyId}\n${slot ?? ''}`;
  const deadTargets = new Set([...alreadyDead].map((match) => deadTarget(match.key.id, match.slot)));
  // keyroll_leak_time_to_dead_seconds counts from here: the command has the leaked value in hand.
  const identifiedAt = performance.now();
  return {
    leaked,
    matches,
    keys: rotated.map((match) => match.key),
    slots,
    announce: (audit) => {
      for (const match of matches) {
        audit
          .child({ ...context, keyId: match.key.id, organizationId: match.key.organizationId })
          .emit('leak.identified', {
            fingerprint: leaked.fingerprint(),
            backend: match.destination.backendName,
            path: match.destination.target.path,
            which: match.which,
            ...(match.slot === undefined ? {} : { slot: match.slot }),
          });
      }
    },
    proofs,
    prove: async (runtime, summary, metrics) => {
      const audit = runtime.audit.child({ ...context, runId: summary.runId });
      const alerter = runtime.rotationDeps(audit).alerter;
      for (const match of matches) {
        // An already-dead value's key was not in the run: its proof has no rotation.
        const outcome = alreadyDead.has(match)
          ? undefined
          : summary.outcomes.find((o) => o.keyId === match.key.id);
        const proof = await proveLeakDead(runtime, audit, alerter, {
          key: match.key,
          leaked,
          ...(match.slot === undefined ? {} : { slot: match.slot }),
          ...(outcome?.rotationId === undefined ? {} : { rotationId: outcome.rotationId }),
          ...(outcome === undefined ? {} : { rotation: outcome.result }),
        });
        proofs.push(proof);
        if (proof.verdict === 'refused' && (outcome?.result === 'rotated' || outcome?.result === 'recovered'))
          metrics?.recordLeakDead(performance.now() - identifiedAt);
      }
      // A rotation that left the leaked value alive (or unproven) did not do its job: exit 1.
      return proofs.some((proof) => proof.verdict !== 'refused') ? ExitCode.someFailed : undefined;
    },
    textLines: () => [
      ...matches.map((match) => `leaked value ${leaked.fingerprint()}: ${describeMatch(match)}`),
      ...proofs.map(
        (proof) =>
          `leaked value ${proof.fingerprint}: ${proof.keyId}${proof.slot === undefined ? '' : ` slot=${proof.slot}`} ${proofSentence(proof)}${deadTargets.has(deadTarget(proof.keyId, proof.slot)) ? '; it was already rotated away, so nothing was rotated' : ''}`,
      ),
    ],
    json: () => ({
      fingerprint: leaked.fingerprint(),
      matches: matches.map(matchJson),
      alreadyDead: [...alreadyDead].map((match) => match.slot ?? match.key.id),
      proofs,
    }),
  };
}

function proofSentence(proof: LeakProof): string {
  if (proof.verdict === 'refused') return 'proven dead: the API refused it (401)';
  if (proof.verdict === 'still-works')
    return 'STILL WORKS: the API accepted it after the rotation (alerted critical)';
  return `unproven: the API gave no answer that says (${proof.errorCode ?? 'unknown error'}); check by hand`;
}
