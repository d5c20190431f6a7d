// Exit codes shared by every command (docs/exit-codes.md).
export const ExitCode = {
  /** Everything in scope succeeded (or nothing was due). */
  ok: 0,
  /** Some keys failed; the others finished. Alerts name each failure. */
  someFailed: 1,
  /** Usage or configuration error (bad flags, invalid policy); nothing was touched. */
  config: 2,
  /** Aborted: keyroll's own credential refused, every key lock busy, or shutdown before completion. */
  aborted: 3,
  /** `identify`, `rotate --leaked-secret-stdin`: no policy entry holds the leaked value (every destination was read). */
  noMatch: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export const EXIT_CODES_HELP = `
Exit codes:
  0  success (everything in scope rotated or nothing was due)
  1  some keys failed (alerts name each one; the rest finished)
  2  usage or configuration error (nothing was touched)
  3  aborted (keyroll's API credential refused, every key lock busy, or shutdown before completion)
  4  identify, rotate --leaked-secret-stdin: no policy entry holds the leaked value`;
