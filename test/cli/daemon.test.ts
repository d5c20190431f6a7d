// `keyroll daemon`'s defaults, without a process: the address it listens on when --listen is not
// given (this machine only) and where the replay record goes. --trigger-key parsing is tested with
// the trigger's keys (test/scheduler/trigger-keys.test.ts).
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LISTEN, defaultStateDir, registerDaemonCommand } from '../../src/cli/daemon.ts';
import { parseListenAddress } from '../../src/daemon/server.ts';

describe('keyroll daemon defaults', () => {
  it('listens on loopback unless told otherwise', () => {
    expect(process.env.KEYROLL_LISTEN).toBeUndefined();
    const program = new Command();
    registerDaemonCommand(program);
    const listen = program.commands
      .find((command) => command.name() === 'daemon')
      ?.options.find((option) => option.long === '--listen');
    expect(listen?.defaultValue).toBe(DEFAULT_LISTEN);
    expect(parseListenAddress(DEFAULT_LISTEN)).toEqual({ host: '127.0.0.1', port: 8080 });
  });

  it('keeps its state in $KEYROLL_STATE_DIR, else the XDG state home', () => {
    expect(defaultStateDir({ KEYROLL_STATE_DIR: '/var/lib/keyroll/state', HOME: '/home/k' })).toBe(
      '/var/lib/keyroll/state',
    );
    expect(defaultStateDir({ XDG_STATE_HOME: '/srv/state', HOME: '/home/k' })).toBe('/srv/state/keyroll');
    expect(defaultStateDir({ HOME: '/home/k' })).toBe('/home/k/.local/state/keyroll');
  });
});
