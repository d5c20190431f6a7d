// The trigger's keys: --trigger-key NAME=REF entries, and keys of at least 32 bytes (issue 12,
// section 3): a shorter HMAC key is refused when the daemon starts (exit 2, naming the caller and
// the reference, never the key) and on reload.
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.ts';
import {
  MIN_TRIGGER_KEY_BYTES,
  parseTriggerKeys,
  resolveTriggerKeys,
} from '../../src/scheduler/trigger-keys.ts';
import { useCliFixture } from '../cli/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const SHORT_KEY = 'k'.repeat(MIN_TRIGGER_KEY_BYTES - 1);

describe('--trigger-key NAME=REF', () => {
  it('reads one caller per entry', () => {
    expect(parseTriggerKeys(['alice=file:/run/keys/alice', 'ci-bot=env:CI_BOT_KEY'])).toEqual([
      { caller: 'alice', ref: 'file:/run/keys/alice' },
      { caller: 'ci-bot', ref: 'env:CI_BOT_KEY' },
    ]);
  });

  it('refuses a literal key, a missing name, a bad name or a repeated caller, without echoing the entry', () => {
    for (const entries of [
      ['alice=s3cr3t-literal-value'],
      ['=env:KEY'],
      ['env:KEY'],
      ['al ice=env:KEY'],
      ['alice=env:A', 'alice=env:B'],
    ]) {
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

describe('trigger key length', () => {
  it('refuses a 31-byte key as a configuration error, without echoing it', async () => {
    let error: unknown;
    try {
      await resolveTriggerKeys([{ caller: 'alice', ref: 'env:ALICE_KEY' }], { ALICE_KEY: SHORT_KEY });
    } catch (caught) {
      error = caught;
    }

    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).code).toBe('KR_USAGE');
    expect((error as Error).message).toContain('alice=env:ALICE_KEY');
    expectNoSecrets([(error as Error).message], [SHORT_KEY]);
  });

  it('counts bytes, not characters', async () => {
    // 11 three-byte characters: 33 bytes.
    const keys = await resolveTriggerKeys([{ caller: 'alice', ref: 'env:ALICE_KEY' }], {
      ALICE_KEY: '€'.repeat(11),
    });

    expect(keys.get('alice')?.reveal()).toBe('€'.repeat(11));
  });

  it('accepts 32 bytes', async () => {
    const keys = await resolveTriggerKeys([{ caller: 'alice', ref: 'env:ALICE_KEY' }], {
      ALICE_KEY: 'k'.repeat(MIN_TRIGGER_KEY_BYTES),
    });

    expect(keys.size).toBe(1);
  });
});

describe('keyroll daemon with a short trigger key', () => {
  const cli = useCliFixture();

  it('exits 2 before serving or rotating anything', async () => {
    await cli.writePolicy();

    const result = await cli.run(
      [
        'daemon',
        '-p',
        'policy.yaml',
        '--listen',
        '127.0.0.1:0',
        '--state-dir',
        'state',
        '--trigger-key',
        'alice=env:KEYROLL_SHORT_TRIGGER_KEY',
      ],
      {
        env: { KEYROLL_SHORT_TRIGGER_KEY: SHORT_KEY },
      },
    );

    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`shorter than ${String(MIN_TRIGGER_KEY_BYTES)} bytes`);
    expectNoSecrets([result.stderr], [SHORT_KEY]);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
