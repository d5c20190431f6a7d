// `--audit-file PATH`: the audit trail as JSON lines appended to a file, next to whatever stdout
// shows. The lines arrive after pino's redaction and the sanitizer (invariant 3). The file is
// made 0600: the trail holds no secret, but it names every key, host and destination.
// Writes are synchronous, like stdout's: a line written before a SIGKILL is in the file
// (invariant 6 relies on the trail), and no buffered write fires later inside a roll window.
import { closeSync, constants, fchmodSync, fstatSync, openSync, writeSync } from 'node:fs';
import { sanitizeText } from '../../audit/public/sanitize.ts';
import { UsageError } from '../../errors.ts';

export interface AuditFileSink {
  write(line: string): void;
  close(): void;
}

/** Opens (creates or appends to) the audit file; a UsageError (exit 2) when it cannot. */
export function openAuditFile(
  path: string,
  warn: (line: string) => void = (line) => process.stderr.write(line),
): AuditFileSink {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND, 0o600);
    const stat = fstatSync(fd);
    // A regular file others can read is narrowed; a device or pipe (/dev/stderr) is left alone.
    if (stat.isFile() && (stat.mode & 0o077) !== 0) fchmodSync(fd, 0o600);
  } catch (error) {
    if (fd !== undefined) closeQuietly(fd);
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    throw new UsageError(
      `--audit-file ${sanitizeText(path)} cannot be opened for appending as 0600 (${code})`,
    );
  }
  let open: number | undefined = fd;
  return {
    write(line) {
      if (open === undefined) return;
      try {
        writeSync(open, line);
      } catch (error) {
        // A full disk must not fail a rotation whose secret is stored: the file stops, stdout's
        // trail (if any) goes on, and the loss is said once on stderr (invariant 7).
        warn(
          `keyroll: --audit-file ${sanitizeText(path)}: write failed (${(error as NodeJS.ErrnoException).code ?? 'error'}); no more lines go to it in this run\n`,
        );
        closeQuietly(open);
        open = undefined;
      }
    },
    close() {
      if (open === undefined) return;
      closeSync(open);
      open = undefined;
    },
  };
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Already failing; the caller reports the first error.
  }
}
