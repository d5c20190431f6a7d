// Issue 29 §1, one rotation path: the rotation function's createSecret is a call of the engine's
// own sequence (rotation/rotate-key.ts: rotateKeyUntilStored), not a copy of its steps with their
// catch and finally, and every step of the function takes the key lock through rotation/key-lock.ts.
// Its behaviour is held by test/integration/aws-native-rotation.test.ts and test/faults/aws-native.test.ts;
// these hold the shape (`npm run lint:imports` holds the first as the rule one-rotation-path).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const lambdaDir = fileURLToPath(new URL('../../src/lambda/', import.meta.url));
const sources = readdirSync(lambdaDir)
  .filter((name) => name.endsWith('.ts'))
  .map((name) => ({ name, text: readFileSync(join(lambdaDir, name), 'utf8') }));

/** The engine's steps and the state they share: what a second copy of the sequence imports. */
const STEP_FILES = /^(step-[a-z-]+|transaction|preflight|failure|roll|store|recovery)\.ts$/;

describe("the rotation function runs the engine's one rotation path", () => {
  it('imports none of the rotation steps: createSecret calls rotateKeyUntilStored', () => {
    const stepImports = sources.flatMap(({ name, text }) =>
      [...text.matchAll(/from '\.\.\/rotation\/([^']+)'/g)]
        .map((m) => m[1] ?? '')
        .filter((file) => STEP_FILES.test(file))
        .map((file) => `${name} → rotation/${file}`),
    );
    expect(stepImports).toEqual([]);
    expect(sources.find((s) => s.name === 'create-secret.ts')?.text).toContain('rotateKeyUntilStored(');
  });

  it('takes and gives back the key lock only through rotation/key-lock.ts', () => {
    const byHand = sources
      .filter(({ text }) => /\.(acquireLock|releaseLock)\(/.test(text))
      .map(({ name }) => name);
    expect(byHand).toEqual([]);
  });
});
