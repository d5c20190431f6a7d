// `keyroll emulator`: runs the local key-management API emulator until SIGINT/SIGTERM.
// The server module (fastify) is imported inside the action so other commands start fast.
import { InvalidArgumentError, type Command } from 'commander';
import { printableLines } from '../audit/public/printable.ts';
import { errorMessage } from '../errors.ts';
import { EMULATOR_IN_BUILD, EMULATOR_LEFT_OUT_MESSAGE } from './build-features.ts';
import { ExitCode } from './exit-codes.ts';

interface EmulatorFlags {
  port: number;
  host: string;
  seed?: string;
  faultInjection: boolean;
  rollRateLimit: number;
  rollBurstSeconds?: number;
  log: boolean;
}

export function registerEmulatorCommand(program: Command): void {
  program
    .command('emulator')
    .description('Run the local key-management API emulator (for demos, tests and integration work).')
    .option('--port <port>', 'TCP port to listen on (0 picks a free port)', parsePort, 8787)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--seed <file>', 'seed file, YAML or JSON (default: config/emulator-seed.yaml)')
    .option(
      '--fault-injection',
      'enable the unauthenticated /_emulator/ admin routes (faults, roll counts); keep on loopback',
      false,
    )
    .option(
      '--roll-rate-limit <n>',
      'rolls per minute shared by OAuth/session principals',
      parsePositiveInt,
      600,
    )
    .option(
      '--roll-burst-seconds <s>',
      'limit those rolls with a token bucket holding this many seconds of the rate (default: fixed clock-minute windows)',
      parsePositiveNumber,
    )
    .option('--log', 'log one line per request (never headers or bodies)', false)
    // Commander copies exitOverride to subcommands only when set before they are created; set it
    // here so a bad flag reaches main() as a CommanderError (exit code 2), not process.exit(1).
    .exitOverride()
    .addHelpText(
      'after',
      '\nSee docs/emulator.md for the seed format, the demo principals and every behaviour the spec leaves open.\n\nExit codes:\n  0  stopped by SIGINT or SIGTERM\n  2  bad flag, unreadable or invalid seed, or the address cannot be bound',
    )
    .action(async (flags: EmulatorFlags) => {
      process.exitCode = await runEmulator(flags);
    });
}

async function runEmulator(flags: EmulatorFlags): Promise<ExitCode> {
  if (!EMULATOR_IN_BUILD) {
    process.stderr.write(`keyroll emulator ${EMULATOR_LEFT_OUT_MESSAGE}\n`);
    return ExitCode.config;
  }
  const { startEmulator } = await import('../emulator/public/server.ts');
  let emulator: Awaited<ReturnType<typeof startEmulator>>;
  try {
    emulator = await startEmulator({
      host: flags.host,
      port: flags.port,
      ...(flags.seed === undefined ? {} : { seed: flags.seed }),
      faultInjection: flags.faultInjection,
      rollRateLimitPerMinute: flags.rollRateLimit,
      ...(flags.rollBurstSeconds === undefined ? {} : { rollRateBurstSeconds: flags.rollBurstSeconds }),
      logger: flags.log,
    });
  } catch (error) {
    // Seed errors name the file and the field; listen errors the address. Neither holds a secret.
    process.stderr.write(`keyroll emulator: cannot start: ${printableLines(errorMessage(error))}\n`);
    return ExitCode.config;
  }
  const seedName = flags.seed ?? 'config/emulator-seed.yaml';
  process.stdout.write(
    `keyroll emulator listening on ${emulator.url} (seed ${seedName}, fault injection ${flags.faultInjection ? 'on' : 'off'})\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await emulator.close();
  return ExitCode.ok;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535)
    throw new InvalidArgumentError('expected a port number from 0 to 65535');
  return port;
}

function parsePositiveNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(n > 0))
    throw new InvalidArgumentError('expected a positive number of seconds');
  return n;
}

function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}
