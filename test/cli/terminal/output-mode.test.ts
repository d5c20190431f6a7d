// Which output run/rotate/demo give (src/cli/terminal/output-mode.ts): a terminal, a pipe, a dumb
// terminal and the flags.
import { describe, expect, it } from 'vitest';
import { colorWanted, resolveOutputMode } from '../../../src/cli/terminal/output-mode.ts';
import { openRunOutput } from '../../../src/cli/terminal/run-output.ts';
import { fakeTty } from './support.ts';

describe('output mode', () => {
  it('a terminal gets the progress view and no trail; a pipe gets JSON lines as before', () => {
    expect(
      resolveOutputMode({}, { stdoutIsTTY: true, stderrIsTTY: true, env: { TERM: 'xterm' } }),
    ).toMatchObject({ trail: 'none', view: 'live', color: true });
    expect(resolveOutputMode({}, { stdoutIsTTY: false, stderrIsTTY: false, env: {} })).toMatchObject({
      trail: 'json',
      view: 'none',
      color: false,
      stderrCounter: false,
    });
    expect(
      resolveOutputMode(
        { logFormat: 'auto' },
        { stdoutIsTTY: false, stderrIsTTY: false, env: { TERM: 'xterm' } },
      ),
    ).toMatchObject({ trail: 'json', view: 'none' });
  });

  it('piped stdout with a person on stderr keeps the stderr counter', () => {
    expect(resolveOutputMode({}, { stdoutIsTTY: false, stderrIsTTY: true, env: {} })).toMatchObject({
      trail: 'json',
      view: 'none',
      stderrCounter: true,
    });
  });

  it('--log-format json|pretty on a terminal prints that trail instead of the view', () => {
    expect(
      resolveOutputMode({ logFormat: 'json' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} }),
    ).toMatchObject({ trail: 'json', view: 'none', stderrCounter: false });
    expect(
      resolveOutputMode({ logFormat: 'pretty' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} }),
    ).toMatchObject({ trail: 'pretty', view: 'none', color: true });
    expect(
      resolveOutputMode({ logFormat: 'pretty' }, { stdoutIsTTY: false, stderrIsTTY: false, env: {} }),
    ).toMatchObject({ trail: 'pretty', color: false });
  });

  it('--audit-file is kept in every mode', () => {
    expect(
      resolveOutputMode({ auditFile: '/tmp/a.jsonl' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} })
        .auditFile,
    ).toBe('/tmp/a.jsonl');
    expect(
      resolveOutputMode({ auditFile: '/tmp/a.jsonl' }, { stdoutIsTTY: false, stderrIsTTY: false, env: {} })
        .auditFile,
    ).toBe('/tmp/a.jsonl');
  });

  it('TERM=dumb appends lines without redrawing and without colour', () => {
    expect(
      resolveOutputMode({}, { stdoutIsTTY: true, stderrIsTTY: true, env: { TERM: 'dumb' } }),
    ).toMatchObject({ trail: 'none', view: 'lines', color: false });
  });

  it('NO_COLOR (set and not empty) turns colour off; empty NO_COLOR does not', () => {
    expect(colorWanted(true, { NO_COLOR: '1' })).toBe(false);
    expect(colorWanted(true, { NO_COLOR: '' })).toBe(true);
    expect(colorWanted(false, {})).toBe(false);
  });

  it('an unknown KEYROLL_LOG_FORMAT is a usage error', async () => {
    const tty = fakeTty();
    await expect(
      openRunOutput({ logFormat: 'yaml' as 'json' }, [], { stdout: tty, stderr: tty, env: {} }),
    ).rejects.toMatchObject({ code: 'KR_USAGE' });
  });
});
