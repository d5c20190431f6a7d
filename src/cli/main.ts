// keyroll's command line. Each command lives in its own file and registers itself here;
// heavy modules (AWS SDK, fastify) are imported inside the actions so `--help` and cold
// starts stay fast.
import { Command, CommanderError } from 'commander';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import { registerAwsCommand } from './aws.ts';
import { registerDaemonCommand } from './daemon.ts';
import { registerDemoCommand } from './demo.ts';
import { registerEmulatorCommand } from './emulator.ts';
import { registerIdentifyCommand } from './identify.ts';
import { registerPlanCommand } from './plan.ts';
import { registerResumeCommand } from './resume.ts';
import { registerRotateCommand } from './rotate.ts';
import { registerStatusCommand } from './status.ts';
import { registerValidateCommand } from './validate.ts';
import { registerRunCommand } from './run.ts';

export function buildProgram(): Command {
  const program = new Command('keyroll')
    .description(
      'Rotate organization API keys and write the one-time secret straight into AWS Secrets Manager, Vault/OpenBao or a file.',
    )
    .version('0.1.0')
    .showHelpAfterError()
    // Before the commands are registered, so each inherits it: usage errors become exit 2.
    .exitOverride()
    .addHelpText('after', EXIT_CODES_HELP);
  registerRunCommand(program);
  registerRotateCommand(program);
  registerResumeCommand(program);
  registerIdentifyCommand(program);
  registerPlanCommand(program);
  registerValidateCommand(program);
  registerStatusCommand(program);
  registerDaemonCommand(program);
  registerDemoCommand(program);
  registerEmulatorCommand(program);
  registerAwsCommand(program);
  return program;
}

/** Entry point used by bin/keyroll. Sets process.exitCode; never prints a secret. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with code 0; usage errors are configuration errors.
      process.exitCode = error.exitCode === 0 ? ExitCode.ok : ExitCode.config;
      return;
    }
    throw error;
  }
}
