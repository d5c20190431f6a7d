// `keyroll rotate --leaked-secret-stdin`: the responder holds a leaked value, not a key id. The
// value is read on stdin, identified as `keyroll identify` does, the entries that hold it are
// rotated with reason leak (a two-slot entry: the slot the value belongs to), and then the API is
// called with the leaked value to prove it dead (src/leaks/proof.ts). Only fingerprints are ever
// printed or audited (invariant 3).
import type { AuditContext } from '../audit/events.ts';
import { createStdoutAudit } from './common.ts';
import type { Secret } from '../audit/secret.ts';
import { searchLeakedSecret, type LeakMatch } from '../leaks/identify.ts';
import { proveLeakDead, type LeakProof } from '../leaks/proof.ts';
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import type { RunSummary } from '../rotation/run.ts';
import { createRuntime, type Runtime } from '../rotation/runtime.ts';
import { ExitCode } from './exit-codes.ts';
import { describeMatch } from './identify.ts';

export interface LeakRotation {
  leaked: Secret;
  matches: LeakMatch[];
  keys: KeyPolicy[];
  /** Two-slot entries: entry id → the slot the leaked value belongs to (the slot to roll). */
  slots: Map<string, string>;
  /** Filled by `prove` once the rotations ended. */
  proofs: LeakProof[];
  /** executeRun's afterRotations: probes the leaked value for every matched entry. */
  prove: (runtime: Runtime, summary: RunSummary) => Promise<RunSummary['exitCode'] | undefined>;
  /** Lines for the text report (before the summary line). */
  textLines: () => string[];
  /** The `leak` member of the `-o json` report. */
  json: () => Record<string, unknown>;
}

/**
 * Finds the entries that hold `leaked`, auditing `leak.identified` (or `leak.unmatched`) on
 * stdout. An exit code when there is nothing to rotate: 4 when every destination was read and
 * none holds the value, 1 when some could not be read.
 */
export async function identifyForRotation(policy: Policy, leaked: Secret, context: AuditContext): Promise<LeakRotation | number> {
  const audit = createStdoutAudit();
  const trail = audit.child(context);
  const fingerprint = leaked.fingerprint();
  const runtime = await createRuntime(policy, { audit });
  let search;
  try {
    search = await searchLeakedSecret(policy, runtime, leaked);
  } finally {
    await runtime.close();
  }
  for (const match of search.matches) {
    trail.child({ keyId: match.key.id, organizationId: match.key.organizationId }).emit('leak.identified', {
      fingerprint,
      backend: match.destination.backendName,
      path: match.destination.target.path,
      which: match.which,
      ...(match.slot === undefined ? {} : { slot: match.slot }),
    });
  }
  if (search.matches.length === 0) trail.emit('leak.unmatched', { fingerprint, searched: search.searched, unread: search.unread });
  await audit.flush();
  for (const unread of search.unread) {
    process.stderr.write(`keyroll: could not read ${unread.backend}:${unread.path} of ${unread.keyId} (${unread.errorCode}); the value may be there\n`);
  }
  if (search.matches.length === 0) {
    process.stderr.write(`keyroll: no policy entry holds this value (fingerprint ${fingerprint}); nothing rotated\n`);
    return search.unread.length > 0 ? ExitCode.someFailed : ExitCode.noMatch;
  }
  return leakRotation(leaked, search.matches, context);
}

function leakRotation(leaked: Secret, matches: LeakMatch[], context: AuditContext): LeakRotation {
  const slots = new Map<string, string>();
  for (const match of matches) if (match.slot !== undefined) slots.set(match.key.id, match.slot);
  const proofs: LeakProof[] = [];
  return {
    leaked,
    matches,
    keys: matches.map((match) => match.key),
    slots,
    proofs,
    prove: async (runtime, summary) => {
      const audit = runtime.audit.child({ ...context, runId: summary.runId });
      const alerter = runtime.rotationDeps(audit).alerter;
      for (const match of matches) {
        const outcome = summary.outcomes.find((o) => o.keyId === match.key.id);
        proofs.push(
          await proveLeakDead(runtime, audit, alerter, {
            key: match.key,
            leaked,
            ...(match.slot === undefined ? {} : { slot: match.slot }),
            ...(outcome?.rotationId === undefined ? {} : { rotationId: outcome.rotationId }),
            ...(outcome === undefined ? {} : { rotation: outcome.result }),
          }),
        );
      }
      // A rotation that left the leaked value alive (or unproven) did not do its job: exit 1.
      return proofs.some((proof) => proof.verdict !== 'refused') ? ExitCode.someFailed : undefined;
    },
    textLines: () => [
      ...matches.map((match) => `leaked value ${leaked.fingerprint()}: ${describeMatch(match)}`),
      ...proofs.map((proof) => `leaked value ${proof.fingerprint}: ${proof.keyId}${proof.slot === undefined ? '' : ` slot=${proof.slot}`} ${proofSentence(proof)}`),
    ],
    json: () => ({
      fingerprint: leaked.fingerprint(),
      matches: matches.map((match) => ({
        keyId: match.key.id,
        organizationId: match.key.organizationId,
        backend: match.destination.backendName,
        path: match.destination.target.path,
        which: match.which,
        ...(match.slot === undefined ? {} : { slot: match.slot }),
      })),
      proofs,
    }),
  };
}

function proofSentence(proof: LeakProof): string {
  if (proof.verdict === 'refused') return 'proven dead: the API refused it (401)';
  if (proof.verdict === 'still-works') return 'STILL WORKS: the API accepted it after the rotation (alerted critical)';
  return `unproven: the API gave no answer that says (${proof.errorCode ?? 'unknown error'}); check by hand`;
}
