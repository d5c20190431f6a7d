// Text from outside keyroll is shown with its control characters escaped, never raw (issue 27,
// finding 4): src/audit/printable.ts, used by every table and line the CLI writes.
import { describe, expect, it } from 'vitest';
import {
  escapeJsonText,
  printable,
  printableJson,
  printableLines,
  terminalLine,
} from '../../src/audit/printable.ts';
import { rawControls } from '../support/raw-controls.ts';

const ESC = '\u001b';
/** Cursor up, erase the line, then a fake state: what made an `owed` consumer read `current`. */
const FORGED = `owed${ESC}[1A${ESC}[2K\rcurrent`;

describe('printable', () => {
  it('shows cursor movement, erase and carriage return as visible escapes', () => {
    expect(printable(FORGED)).toBe('owed\\u001b[1A\\u001b[2K\\rcurrent');
  });

  it('escapes an OSC title sequence, BEL, DEL, a one-character C1 CSI and the bidi overrides', () => {
    const text = `a${ESC}]0;pwned\u0007b\u007fc\u009b2Jd\u202etnerruc\u202ce\u2066f\u2028g`;
    const shown = printable(text);
    expect(rawControls(shown)).toEqual([]);
    expect(shown).toBe('a\\u001b]0;pwned\\u0007b\\u007fc\\u009b2Jd\\u202etnerruc\\u202ce\\u2066f\\u2028g');
  });

  it('leaves ordinary text, accents and emoji alone', () => {
    expect(printable('key_demo_billing — café ✔ 🔑')).toBe('key_demo_billing — café ✔ 🔑');
  });

  it('printableLines keeps line feeds (a policy error on several lines) and escapes the rest', () => {
    expect(printableLines(`line 1\nline 2${ESC}[1A\r`)).toBe('line 1\nline 2\\u001b[1A\\r');
  });

  it('terminalLine escapes the values, never its own words', () => {
    expect(terminalLine`keyroll: ${'key_a'}: held by ${FORGED}\n`).toBe(
      'keyroll: key_a: held by owed\\u001b[1A\\u001b[2K\\rcurrent\n',
    );
  });
});

describe('printableJson', () => {
  it('parses back to the same value and carries no raw control, C1 or bidi character', () => {
    const value = { message: `x${ESC}[2K\u009b1A\u202e\u007fy`, list: ['\u0085'] };
    const json = printableJson(value, 2);
    expect(rawControls(json)).toEqual([]);
    expect(JSON.parse(json)).toEqual(value);
  });

  it('escapeJsonText leaves JSON without such characters byte for byte', () => {
    const line = JSON.stringify({ event: 'key.rotated', keyId: 'key_a', note: 'café' });
    expect(escapeJsonText(line)).toBe(line);
  });
});
