import type { Command } from 'commander';

// Placeholder registration; the emulator command is filled in with src/emulator/.
export function registerEmulatorCommand(program: Command): void {
  program
    .command('emulator')
    .description('Run the local key-management API emulator (for demos, tests and integration work).')
    .option('--port <port>', 'TCP port to listen on', '8787');
}
