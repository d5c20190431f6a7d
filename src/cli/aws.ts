// `keyroll aws enable-rotation` / `disable-rotation`: turns AWS Secrets Manager's own rotation on
// or off for an aws-native key (docs/aws-native.md). enable calls RotateSecret with the rotation
// function's ARN and the schedule derived from the policy (src/lambda/schedule.ts), with
// RotateImmediately false: nothing is rolled now; disable calls CancelRotateSecret.
import { primaryDestination } from '../policy/public/schema.ts';
import type { Command } from 'commander';
import { UsageError } from '../errors.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';
import { ExitCode } from './exit-codes.ts';

interface AwsRotationFlags {
  policy: string;
  key: string;
  functionArn?: string;
}

export function registerAwsCommand(program: Command): void {
  const aws = program
    .command('aws')
    .description('AWS Secrets Manager set-up for keys with scheduler: aws-native (docs/aws-native.md).');
  addPolicyOption(
    aws
      .command('enable-rotation')
      .description(
        "Turn on Secrets Manager's rotation of an aws-native key's secret, with keyroll's rotation function and a schedule derived from the key's maxAge (AWS minimum 4h). Rolls nothing now.",
      )
      .requiredOption('--key <id>', 'the policy entry (scheduler: aws-native)')
      .requiredOption(
        '--function-arn <arn>',
        "the rotation function's ARN (the CloudFormation stack's output FunctionArn); env KEYROLL_ROTATION_FUNCTION_ARN",
        process.env.KEYROLL_ROTATION_FUNCTION_ARN,
      ),
  ).action(async (flags: AwsRotationFlags) => {
    process.exitCode = await awsRotation('enable', flags);
  });
  addPolicyOption(
    aws
      .command('disable-rotation')
      .description(
        "Turn off Secrets Manager's rotation of a key's secret (CancelRotateSecret); keyroll run and the daemon schedule it again once its scheduler is keyroll.",
      )
      .requiredOption('--key <id>', 'the policy entry'),
  ).action(async (flags: AwsRotationFlags) => {
    process.exitCode = await awsRotation('disable', flags);
  });
}

async function awsRotation(action: 'enable' | 'disable', flags: AwsRotationFlags): Promise<number> {
  let backend;
  try {
    const policy = await loadPolicyOrExit(flags.policy);
    const key = policy.keys.find((candidate) => candidate.id === flags.key);
    if (key === undefined) throw new UsageError(`no key ${JSON.stringify(flags.key)} in ${policy.file}`);
    const destination = primaryDestination(key);
    const config = policy.backends[destination.backend];
    if (config?.kind !== 'aws') throw new UsageError(`key ${key.id}: its destination is not an aws backend`);
    const [{ createBackend }, { rotationRulesFor }] = await Promise.all([
      import('../backends/public/registry.ts'),
      import('../lambda/public/schedule.ts'),
    ]);
    backend = await createBackend(destination.backend, config, { now: () => new Date() });
    const native = backend.native;
    if (native === undefined)
      throw new UsageError(`backend ${destination.backend} is not an AWS Secrets Manager backend`);
    const path = destination.target.path;
    if (action === 'disable') {
      await native.disable(path);
      process.stdout.write(
        `rotation disabled on ${path}; set scheduler: keyroll on key ${key.id} so keyroll schedules it again\n`,
      );
      return ExitCode.ok;
    }
    if (key.scheduler !== 'aws-native')
      throw new UsageError(
        `key ${key.id} does not have scheduler: aws-native; set it (keyroll validate checks the entry) so run and the daemon leave the key to Secrets Manager`,
      );
    if (flags.functionArn === undefined || flags.functionArn === '')
      throw new UsageError('--function-arn is required');
    let rules;
    try {
      rules = rotationRulesFor(key);
    } catch (error) {
      // The policy cannot give AWS a schedule: a configuration error (exit 2), nothing was called.
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
    await native.enable(path, flags.functionArn, rules);
    const view = await native.describe(path);
    const schedule =
      rules.AutomaticallyAfterDays === undefined
        ? rules.ScheduleExpression
        : `every ${String(rules.AutomaticallyAfterDays)} days`;
    process.stdout.write(
      `rotation enabled on ${path}: ${schedule ?? '-'} with ${flags.functionArn}; RotationEnabled: ${String(view.rotationEnabled)}\n`,
    );
    return ExitCode.ok;
  } catch (error) {
    return exitForError(error);
  } finally {
    await backend?.close();
  }
}
