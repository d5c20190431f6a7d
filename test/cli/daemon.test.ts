// `keyroll daemon`'s defaults and flag parsing, without a process: the address it listens on when
// --listen is not given (this machine only), where the replay record goes, and --trigger-key.
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LISTEN, defaultStateDir, registerDaemonCommand } from '../../src/cli/daemon.ts';
import { parseListenAddress } from '../../src/daemon/server.ts';
import { parseTriggerKeys } from '../../src/scheduler/trigger-keys.ts';

describe('keyroll daemon defaults', () => {
  it('listens on loopback unless told otherwise', () => {
    expect(process.env.KEYROLL_LISTEN).toBeUndefined();
    const program = new Command();
    registerDaemonCommand(program);
    const listen = program.commands.find((command) => command.name() === 'daemon')?.options.find((option) => option.long === '--listen');
    expect(listen?.defaultValue).toBe(DEFAULT_LISTEN);
    expect(parseListenAddress(DEFAULT_LISTEN)).toEqual({ host: '127.0.0.1', port: 8080 });
  });

  it('keeps its state in $KEYROLL_STATE_DIR, else the XDG state home', () => {
    expect(defaultStateDir({ KEYROLL_STATE_DIR: '/var/lib/keyroll/state', HOME: '/home/k' })).toBe('/var/lib/keyroll/state');
    expect(defaultStateDir({ XDG_STATE_HOME: '/srv/state', HOME: '/home/k' })).toBe('/srv/state/keyroll');
    expect(defaultStateDir({ HOME: '/home/k' })).toBe('/home/k/.local/state/keyroll');
  });
});

describe('--trigger-key NAME=REF', () => {
  it('reads one caller per entry', () => {
    expect(parseTriggerKeys(['alice=file:/run/keys/alice', 'ci-bot=env:CI_BOT_KEY'])).toEqual([
      { caller: 'alice', ref: 'file:/run/keys/alice' },
      { caller: 'ci-bot', ref: 'env:CI_BOT_KEY' },
    ]);
  });

  it('refuses a literal key, a missing name, a bad name or a repeated caller, without echoing the entry', () => {
    for (const entries of [['alice=s3cr3t-literal-value'], ['=env:KEY'], ['env:KEY'], ['al ice=env:KEY'], ['alice=env:A', 'alice=env:B']]) {
      let error: unknown;
      try {
        parseTriggerKeys(entries);
      } catch (caught) {
        error = caught;
      }
      expect(error, entries.join(' ')).toMatchObject({ code: 'KR_USAGE' });
      expect((error as Error).message).not.toContain('s3cr3t');
    }
  });
});
