// How much of the crash/concurrency/generated-input suite runs, and the one polling helper it
// needs. KEYROLL_FAULTS=full runs the full counts (20 kills per step boundary); without
// it the crash cases run a shorter round so CI stays in minutes. Every count can be set on its
// own, and the generated inputs take a seed so a failing case can be replayed exactly.

function countFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return value;
}

export const FULL = process.env.KEYROLL_FAULTS === 'full';

/** Kills per step boundary: KEYROLL_FAULTS_CRASH_ITERATIONS, else 20 with KEYROLL_FAULTS=full, else 4. */
export function crashIterations(): number {
  return countFromEnv('KEYROLL_FAULTS_CRASH_ITERATIONS', FULL ? 20 : 4);
}

/** Seed of the generated policies and API answers (KEYROLL_FAULTS_SEED), fixed by default so runs repeat. */
export function faultSeed(): number {
  return countFromEnv('KEYROLL_FAULTS_SEED', 20_240_606);
}
