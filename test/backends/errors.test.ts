import { describe, expect, it } from 'vitest';
import { BackendError, codeForHttpStatus, codeForTransportError } from '../../src/backends/errors.ts';
import { KeyrollError } from '../../src/errors.ts';

const context = { backend: 'primary', kind: 'vault', operation: 'write', path: 'apps/x' } as const;

describe('BackendError', () => {
  it('is a KeyrollError whose retryability follows its code', () => {
    expect(new BackendError('KR_BACKEND_UNAVAILABLE', 'down', context)).toMatchObject({
      retryable: true,
      name: 'BackendError',
    });
    expect(new BackendError('KR_BACKEND_TIMEOUT', 'slow', context).retryable).toBe(true);
    expect(new BackendError('KR_BACKEND_DENIED', 'no', context).retryable).toBe(false);
    expect(new BackendError('KR_BACKEND_CONFLICT', 'lost', context).retryable).toBe(false);
    expect(new BackendError('KR_BACKEND_DENIED', 'no', context)).toBeInstanceOf(KeyrollError);
  });

  it('lets the caller override retryability', () => {
    expect(new BackendError('KR_BACKEND_FAILED', 'x', { ...context, retryable: true }).retryable).toBe(true);
  });

  it('puts its context in toFields, status only when there was one', () => {
    expect(new BackendError('KR_BACKEND_DENIED', 'no', { ...context, status: 403 }).toFields()).toEqual({
      errorCode: 'KR_BACKEND_DENIED',
      errorMessage: 'no',
      backend: 'primary',
      backendKind: 'vault',
      operation: 'write',
      path: 'apps/x',
      status: 403,
      retryable: false,
    });
    expect(new BackendError('KR_BACKEND_DENIED', 'no', context).toFields()).not.toHaveProperty('status');
  });

  it('keeps its cause', () => {
    const cause = new Error('socket hang up');
    expect(new BackendError('KR_BACKEND_UNAVAILABLE', 'down', { ...context, cause }).cause).toBe(cause);
  });
});

describe('codeForHttpStatus', () => {
  it.each([
    [401, 'KR_BACKEND_DENIED'],
    [403, 'KR_BACKEND_DENIED'],
    [404, 'KR_BACKEND_NOT_FOUND'],
    [408, 'KR_BACKEND_TIMEOUT'],
    [409, 'KR_BACKEND_CONFLICT'],
    [412, 'KR_BACKEND_CONFLICT'],
    [429, 'KR_BACKEND_THROTTLED'],
    [500, 'KR_BACKEND_UNAVAILABLE'],
    [503, 'KR_BACKEND_UNAVAILABLE'],
    [400, 'KR_BACKEND_FAILED'],
  ])('maps %i to %s', (status, code) => {
    expect(codeForHttpStatus(status)).toBe(code);
  });
});

describe('codeForTransportError', () => {
  const withCode = (code: string): Error => Object.assign(new Error(code), { code });

  it('finds a refused connection deep in the cause chain', () => {
    expect(
      codeForTransportError(
        new Error('fetch failed', { cause: new Error('wrapper', { cause: withCode('ECONNREFUSED') }) }),
      ),
    ).toBe('KR_BACKEND_UNAVAILABLE');
  });

  it('classifies undici timeouts and abort-by-timeout as timeouts', () => {
    expect(codeForTransportError(withCode('UND_ERR_HEADERS_TIMEOUT'))).toBe('KR_BACKEND_TIMEOUT');
    expect(codeForTransportError(new DOMException('timed out', 'TimeoutError'))).toBe('KR_BACKEND_TIMEOUT');
  });

  it('says nothing about errors that are not transport failures', () => {
    expect(codeForTransportError(new TypeError('bad argument'))).toBeUndefined();
    expect(codeForTransportError('not an error')).toBeUndefined();
  });
});
