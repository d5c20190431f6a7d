// `keyroll identify`: which policy entry does a leaked value belong to? Reads the value on stdin
// (src/cli/leaked-stdin.ts says why nowhere else), compares its digest with what each destination
// holds now and held before, and prints the key, never the value. Read-only: no lock, no audit
// trail, no API call.
import { Option, type Command } from 'commander';
import { printableJson, terminalLine } from '../audit/public/printable.ts';
import type { LeakMatch, LeakSearch } from '../leaks/public/identify.ts';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';

interface IdentifyFlags {
  policy: string;
  output: 'text' | 'json';
}

export function registerIdentifyCommand(program: Command): void {
  const command = program
    .command('identify')
    .description(
      'Which key is this leaked value? Reads it on standard input (never an argument or the environment; a terminal is refused), compares its SHA-256 with the secret each destination holds now and held before, and prints the key id, organization, destination and, for a two-slot entry, the slot. Prints only fingerprints, never the value. Exit 0 on a match, 4 when no policy entry holds the value.',
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText(
      'after',
      `
Examples:
  pbpaste | keyroll identify --policy policy.yaml
  kubectl get secret leaked -o jsonpath='{.data.apiKey}' | base64 -d | keyroll identify -o json
  # then rotate it: the same pipe into keyroll rotate --leaked-secret-stdin --reason leak
${EXIT_CODES_HELP}
  identify exits 1 when nothing matched but some destination could not be read (the value may be there).`,
    );
  addPolicyOption(command).action(async (flags: IdentifyFlags) => {
    process.exitCode = await identifyCommand(flags);
  });
}

async function identifyCommand(flags: IdentifyFlags): Promise<number> {
  const policyLoaded = loadPolicyOrExit(flags.policy);
  const [{ readLeakedSecret }, { searchLeakedSecret }, { createRuntime }, { createNullAuditLog }] =
    await Promise.all([
      import('./leaked-stdin.ts'),
      import('../leaks/public/identify.ts'),
      import('../rotation/public/runtime.ts'),
      import('../audit/public/logger.ts'),
    ]);
  let leaked;
  let policy;
  try {
    // The value first: it is registered with the sanitizer before anything could print it.
    leaked = await readLeakedSecret();
    policy = await policyLoaded;
  } catch (error) {
    return exitForError(error);
  }
  let runtime;
  try {
    // Only the backends are used: no API call, so keyroll's own credential is never resolved.
    runtime = await createRuntime(policy, { audit: createNullAuditLog() });
    const search = await searchLeakedSecret(policy, runtime, leaked);
    const fingerprint = leaked.fingerprint();
    if (flags.output === 'json')
      process.stdout.write(`${printableJson(jsonReport(fingerprint, search), 2)}\n`);
    else for (const match of search.matches) process.stdout.write(terminalLine`${describeMatch(match)}\n`);
    for (const unread of search.unread) {
      process.stderr.write(
        terminalLine`keyroll: could not read ${unread.backend}:${unread.path} of ${unread.keyId} (${unread.errorCode}); the value may be there\n`,
      );
    }
    if (search.matches.length > 0) return ExitCode.ok;
    process.stderr.write(
      `keyroll: no policy entry holds this value (fingerprint ${fingerprint}); ${String(search.searched)} stored values compared\n`,
    );
    return search.unread.length > 0 ? ExitCode.someFailed : ExitCode.noMatch;
  } catch (error) {
    return exitForError(error);
  } finally {
    await runtime?.close();
  }
}

/** One line per match: `key_x org_y files:x.json current` reads well and splits on spaces. */
export function describeMatch(match: LeakMatch): string {
  const slot = match.slot === undefined ? '' : ` slot=${match.slot}`;
  return `${match.key.id} organization=${match.key.organizationId} destination=${match.destination.backendName}:${match.destination.target.path} value=${match.which}${slot}`;
}

/** A match in the JSON output of `keyroll identify` and of a leak rotation (`keyroll rotate --leaked-secret-stdin`). */
export function matchJson(match: LeakMatch): Record<string, unknown> {
  return {
    keyId: match.key.id,
    organizationId: match.key.organizationId,
    backend: match.destination.backendName,
    path: match.destination.target.path,
    which: match.which,
    ...(match.slot === undefined ? {} : { slot: match.slot }),
  };
}

export function jsonReport(fingerprint: string, search: LeakSearch): Record<string, unknown> {
  return {
    fingerprint,
    matches: search.matches.map(matchJson),
    unread: search.unread,
    searched: search.searched,
  };
}
