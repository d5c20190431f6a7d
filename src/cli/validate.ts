import { Option, type Command } from 'commander';
import { printableJson, terminalLine } from '../audit/public/printable.ts';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';
import { validateObjectsCommand } from './validate-objects.ts';
import { formatIssue } from '../policy/public/errors.ts';
import type { Policy } from '../policy/public/schema.ts';

interface ValidateFlags {
  policy: string;
  offline?: boolean;
  output: 'text' | 'json';
}

interface Check {
  check: string;
  ok: boolean;
  detail?: string;
  errorCode?: string;
  /** A consumer that cannot be refreshed as the policy and cluster stand: a setting to fix (exit 2). */
  consumerSetting?: boolean;
}

export function registerValidateCommand(program: Command): void {
  const command = program
    .command('validate')
    .description(
      "Check the policy against the schema (exit 2 with file:line and the field on error), then preflight every destination and fallback and keyroll's API credential, and read every Kubernetes consumer live (exists, external-secrets version served, keyroll's own access, force-sync not switched off: exit 2 naming it), without rolling anything or changing any secret.",
    )
    .argument(
      '[dir]',
      'a directory of keyroll.io objects (YAML): check each against the schemas of its CRD instead of the policy, offline (docs/crds.md)',
    )
    .option('--offline', 'check the policy only; contact no backend and no API')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText(
      'after',
      `${EXIT_CODES_HELP}
  (validate: 1 = a destination or fallback failed preflight, or the Kubernetes API server could not be reached;
   2 = also a consumer keyroll could not refresh: missing, external-secrets.io not served, access denied, force-sync off;
   3 = keyroll's API credential was refused)`,
    );
  addPolicyOption(command).action(async (dir: string | undefined, flags: ValidateFlags) => {
    process.exitCode =
      dir === undefined ? await validateCommand(flags) : await validateObjectsCommand(dir, flags.output);
  });
}

// eslint-disable-next-line max-lines-per-function -- a linear command: one check after another, each printing its verdict, in the order an operator reads them
async function validateCommand(flags: ValidateFlags): Promise<number> {
  let policy;
  try {
    policy = await loadPolicyOrExit(flags.policy);
  } catch (error) {
    return exitForError(error);
  }
  const checks: Check[] = [
    {
      check: `policy ${policy.file}`,
      ok: true,
      detail: `${policy.keys.length} keys, ${Object.keys(policy.backends).length} backends`,
    },
  ];
  let credentialRefused = false;
  if (!flags.offline) {
    const [{ createRuntime }, { createNullAuditLog }, { ApiError }, { errorCode, errorMessage }] =
      await Promise.all([
        import('../rotation/public/runtime.ts'),
        import('../audit/public/logger.ts'),
        import('../api/public/errors.ts'),
        import('../errors.ts'),
      ]);
    let runtime;
    try {
      runtime = await createRuntime(policy, { audit: createNullAuditLog() });
    } catch (error) {
      return exitForError(error);
    }
    try {
      try {
        await runtime.checkApiCredential();
        checks.push({
          check: `api credential ${runtime.credentialDescription}`,
          ok: true,
          detail: policy.api.baseUrl,
        });
      } catch (error) {
        // A refused token (401) and a credential that cannot be obtained at all (unreadable
        // reference, OAuth client refused by the token endpoint) both stop every run: exit 3.
        credentialRefused =
          (error instanceof ApiError && error.status === 401) ||
          ['KR_API_CREDENTIAL_UNAVAILABLE', 'KR_CREDENTIAL_UNAVAILABLE', 'KR_REF_UNRESOLVED'].includes(
            errorCode(error),
          );
        const hint = credentialRefused
          ? 'refused (401): check that it is set, valid and not expired'
          : errorMessage(error);
        checks.push({
          check: `api credential ${runtime.credentialDescription}`,
          ok: false,
          errorCode: errorCode(error),
          detail: hint,
        });
      }
      const seen = new Set<string>();
      for (const key of policy.keys) {
        const { destinations, fallbacks } = runtime.resolveKey(key);
        for (const [role, list] of [
          ['destination', destinations],
          ['fallback', fallbacks],
        ] as const) {
          for (const destination of list) {
            const label = `${role} ${destination.backendName}:${destination.target.path}`;
            if (seen.has(label)) continue;
            seen.add(label);
            try {
              const result = await destination.backend.preflight(
                destination.target,
                key.scheduler === 'aws-native' ? 'check-native' : 'check',
              );
              checks.push({
                check: label,
                ok: true,
                detail: `${key.id}: ${result.exists ? 'exists' : 'will be created'}; ${result.checks.join(', ')}`,
              });
            } catch (error) {
              checks.push({
                check: label,
                ok: false,
                errorCode: errorCode(error),
                detail: `${key.id}: ${errorMessage(error)}`,
              });
            }
          }
        }
      }
    } finally {
      await runtime.close();
    }
    checks.push(...(await consumerChecks(policy)));
  }
  // Warnings do not change the exit code: the policy is valid, and says so on purpose.
  const warnings = policy.warnings ?? [];
  if (flags.output === 'json') {
    process.stdout.write(`${printableJson({ policy: policy.file, checks, warnings }, 2)}\n`);
  } else {
    for (const warning of warnings) process.stdout.write(terminalLine`warn  ${formatIssue(warning)}\n`);
    for (const c of checks) {
      process.stdout.write(
        terminalLine`${c.ok ? 'ok  ' : 'FAIL'}  ${c.check}${c.detail ? ` — ${c.detail}` : ''}${c.errorCode && !c.ok ? ` [${c.errorCode}]` : ''}\n`,
      );
    }
  }
  if (credentialRefused) return ExitCode.aborted;
  if (checks.some((c) => !c.ok && c.consumerSetting === true)) return ExitCode.config;
  return checks.every((c) => c.ok) ? ExitCode.ok : ExitCode.someFailed;
}

/** Each Kubernetes consumer the policy lists, read live (src/consumers/check.ts); none when no key lists one. */
async function consumerChecks(policy: Policy): Promise<Check[]> {
  if (!policy.keys.some((key) => (key.consumers ?? []).some((consumer) => consumer.kind !== 'webhook')))
    return [];
  const [{ checkConsumers }, { loadKubeConfig, NodeKubeClient }, { errorCode, errorMessage }] =
    await Promise.all([
      import('../consumers/public/check.ts'),
      import('../consumers/public/kubernetes/node-client.ts'),
      import('../errors.ts'),
    ]);
  let client;
  try {
    client = new NodeKubeClient(loadKubeConfig(policy.consumers?.kubernetes ?? {}));
  } catch (error) {
    return [
      {
        check: 'kubernetes client',
        ok: false,
        errorCode: errorCode(error),
        detail: errorMessage(error),
        consumerSetting: true,
      },
    ];
  }
  return (await checkConsumers(policy.keys, client)).map((result) => ({
    check: `consumer ${result.consumer}`,
    ok: result.ok,
    detail: `${result.keyIds.join(', ')}: ${result.detail}`,
    ...(result.errorCode === undefined ? {} : { errorCode: result.errorCode }),
    ...(result.ok || result.transient === true ? {} : { consumerSetting: true }),
  }));
}
