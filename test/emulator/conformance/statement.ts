import type { StartEmulatorOptions } from '../../../src/emulator/server.ts';
import type { EmulatorEnv } from '../support.ts';

/** One row of the conformance table: a statement of the spec and the check that proves it. */
export interface SpecStatement {
  statement: string;
  /** Emulator options for this row (a fresh emulator per row). */
  options?: StartEmulatorOptions;
  check(env: EmulatorEnv): Promise<void>;
}
