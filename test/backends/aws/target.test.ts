import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lockSecretName } from '../../../src/backends/aws/lock/companion.ts';
import { checkTargetPath, isSecretArn, secretNameOf } from '../../../src/backends/aws/target.ts';
import { clientRequestToken } from '../../../src/backends/aws/write.ts';
import { BackendError } from '../../../src/backends/errors.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/api/key-AbC123';

describe('aws target paths', () => {
  it('reads the secret name out of a full ARN', () => {
    expect(isSecretArn(ARN)).toBe(true);
    expect(secretNameOf(ARN)).toBe('prod/api/key');
    expect(secretNameOf('prod/api/key')).toBe('prod/api/key');
  });

  it('names the lock companion after the secret name, for a name and an ARN alike', () => {
    expect(lockSecretName('prod/api/key')).toBe('prod/api/key.keyroll-lock');
    expect(lockSecretName(ARN)).toBe('prod/api/key.keyroll-lock');
  });

  it('accepts Secrets Manager names and ARNs', () => {
    for (const path of ['a', 'prod/api/key_1', 'x+y=z.w@v-u', ARN]) {
      expect(() => {
        checkTargetPath(path, { backendName: 'aws', operation: 'write' });
      }).not.toThrow();
    }
  });

  it('rejects empty, ill-formed and over-long names as KR_BACKEND_INVALID_TARGET', () => {
    for (const path of ['', 'has space', 'semi;colon', 'a'.repeat(500)]) {
      let thrown: unknown;
      try {
        checkTargetPath(path, { backendName: 'aws', operation: 'write' });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(BackendError);
      expect((thrown as BackendError).code).toBe('KR_BACKEND_INVALID_TARGET');
    }
  });
});

describe('aws ClientRequestToken', () => {
  it('is the rotation id itself for a UUID', () => {
    const id = '3f2c8a4e-1b7d-4e0a-9c55-0a1b2c3d4e5f';
    expect(clientRequestToken(id)).toBe(id);
  });

  it('is 32 to 64 characters and the same on every retry, whatever the rotation id', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 200 }), (id) => {
        const token = clientRequestToken(id);
        expect(token.length).toBeGreaterThanOrEqual(32);
        expect(token.length).toBeLessThanOrEqual(64);
        expect(clientRequestToken(id)).toBe(token);
      }),
    );
  });

  it('differs between rotations', () => {
    expect(clientRequestToken('rot-1')).not.toBe(clientRequestToken('rot-2'));
    expect(clientRequestToken('x'.repeat(70))).not.toBe(clientRequestToken('x'.repeat(71)));
  });
});
