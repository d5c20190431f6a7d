// The one way a leaked value enters keyroll from the command line: standard input. Not argv and
// not the environment: both are visible to other processes of the same user (ps, /proc/<pid>/
// cmdline and environ) and land in shell history. A terminal is refused rather than read: what is
// typed or pasted there is echoed to the screen and its scrollback (and to any recording of the
// session), which is one more copy of the leak.
import { Secret } from '../audit/public/secret.ts';
import { UsageError } from '../errors.ts';

/** Far above any API key; a whole file or log piped in by mistake is refused, not searched. */
export const MAX_LEAKED_BYTES = 16 * 1024;

export interface LeakedInput extends AsyncIterable<Buffer | string> {
  isTTY?: boolean;
}

export const STDIN_IS_TERMINAL =
  'the leaked value is read from standard input, and standard input is a terminal (what is typed there is echoed): pipe it in, e.g. `pbpaste | keyroll …`, `xclip -o -selection clipboard | keyroll …` or `read -rs LEAKED && printf %s "$LEAKED" | keyroll …`; never pass it as an argument or an environment variable';

/**
 * Reads the leaked value: the whole input, surrounding whitespace and line breaks dropped (a
 * trailing newline from `echo` or a clipboard tool is not part of the secret). Wrapped in a pinned
 * Secret at once, so the sanitizer blanks it (and its encoded forms) from every output for the
 * life of the process. Refuses a terminal, an empty input, more than one line and oversize input.
 */
export async function readLeakedSecret(input: LeakedInput = process.stdin): Promise<Secret> {
  if (input.isTTY === true) throw new UsageError(STDIN_IS_TERMINAL);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of input) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      size += bytes.length;
      chunks.push(bytes);
      if (size > MAX_LEAKED_BYTES) {
        throw new UsageError(
          `standard input holds more than ${String(MAX_LEAKED_BYTES / 1024)} KiB: pipe in the leaked value alone, not a file or a log`,
        );
      }
    }
    const bytes = Buffer.concat(chunks);
    const text = bytes.toString('utf8').trim();
    bytes.fill(0);
    if (text === '')
      throw new UsageError('standard input is empty: pipe in the leaked value (e.g. `pbpaste | keyroll …`)');
    // Registered with the sanitizer before any check that could put it in a message.
    const leaked = new Secret(text).pinned();
    if (/[\r\n]/.test(text))
      throw new UsageError('standard input holds more than one line: pipe in the leaked value alone');
    return leaked;
  } finally {
    for (const chunk of chunks) chunk.fill(0);
  }
}
