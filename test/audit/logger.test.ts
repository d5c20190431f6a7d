import { execFile } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { AUDIT_EVENTS, type AuditEventName } from '../../src/audit/events.ts';
import { AUDIT_EVENT_LEVELS } from '../../src/audit/levels.ts';
import {
  AUDIT_REDACT_PATHS,
  auditLevelFromEnv,
  createAuditLog,
  createMemoryAuditLog,
  createNullAuditLog,
} from '../../src/audit/logger.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { KeyrollError } from '../../src/errors.ts';

afterEach(() => {
  resetSanitizerForTests();
});

const FIXED_NOW = Date.parse('2026-03-01T12:00:00.000Z');

describe('createAuditLog: line shape', () => {
  it('writes one JSON line per event with the name as event and msg, an ISO time and a string level', () => {
    const log = createMemoryAuditLog({ now: () => FIXED_NOW });

    log.emit('key.rolled', { fingerprint: 'abc123def456' });

    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]!.endsWith('\n')).toBe(true);
    expect(log.events[0]).toMatchObject({
      event: 'key.rolled',
      msg: 'key.rolled',
      level: 'info',
      time: '2026-03-01T12:00:00.000Z',
      fingerprint: 'abc123def456',
    });
  });

  it('writes every catalogue event at its catalogue level', () => {
    const log = createMemoryAuditLog({ level: 'debug' });
    const names = Object.keys(AUDIT_EVENTS) as AuditEventName[];

    for (const name of names) log.emit(name);

    expect(log.events.map((e) => [e.event, e.level])).toEqual(
      names.map((name) => [name, AUDIT_EVENT_LEVELS[name]]),
    );
  });

  it('writes failures as error and retries as warn', () => {
    expect(AUDIT_EVENT_LEVELS['key.failed']).toBe('error');
    expect(AUDIT_EVENT_LEVELS['alert.undeliverable']).toBe('error');
    expect(AUDIT_EVENT_LEVELS['key.store.retry']).toBe('warn');
    expect(AUDIT_EVENT_LEVELS['key.roll.retry']).toBe('warn');
    expect(AUDIT_EVENT_LEVELS['key.stored']).toBe('info');
  });

  it('writes debug events (throttle answers waited out) only when asked to, by option or KEYROLL_AUDIT_LEVEL', () => {
    const quiet = createMemoryAuditLog();
    quiet.emit('backend.throttled', { group: 'write' });
    expect(quiet.events).toEqual([]);
    expect(auditLevelFromEnv({ KEYROLL_AUDIT_LEVEL: 'DEBUG' })).toBe('debug');
    expect(auditLevelFromEnv({ KEYROLL_AUDIT_LEVEL: 'verbose' })).toBe('info');
    expect(auditLevelFromEnv({})).toBe('info');
  });

  it('drops events below the configured level', () => {
    const log = createMemoryAuditLog({ level: 'warn' });

    log.emit('key.rolled');
    log.emit('key.store.retry');
    log.emit('key.failed');

    expect(log.events.map((e) => e.event)).toEqual(['key.store.retry', 'key.failed']);
  });

  it('writes to a plain Node writable stream and flushes', async () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
    const log = createAuditLog({ destination: stream });

    log.emit('run.started', { keys: 2 });
    await log.flush();

    expect(JSON.parse(chunks.join(''))).toMatchObject({ event: 'run.started', keys: 2 });
  });

  it('writes to stdout synchronously by default, so a line survives an immediate exit', async () => {
    const script = `import { createAuditLog } from ${JSON.stringify(new URL('../../src/audit/logger.ts', import.meta.url).href)};
createAuditLog().emit('key.intent.set', { step: 'intent' });
process.exit(0);`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);

    expect(JSON.parse(stdout)).toMatchObject({ event: 'key.intent.set', step: 'intent' });
  });
});

describe('createAuditLog: context', () => {
  it('puts the base context, and every child context, on every line', () => {
    const log = createMemoryAuditLog({ base: { runId: 'run-1' } });
    const run = log.child({ actor: 'alice', reason: 'leak', ticket: 'SEC-7' });
    const rotation = run.child({ rotationId: 'rot-1', keyId: 'key-1', organizationId: 'org-1' });

    rotation.emit('key.preflight.passed');
    rotation.emit('key.rolled', { fingerprint: 'f' });
    rotation.emit('key.failed', { step: 'store' });

    for (const event of log.events) {
      expect(event).toMatchObject({
        runId: 'run-1',
        actor: 'alice',
        reason: 'leak',
        ticket: 'SEC-7',
        rotationId: 'rot-1',
        keyId: 'key-1',
        organizationId: 'org-1',
      });
    }
  });

  it('keeps a child context off its parent', () => {
    const log = createMemoryAuditLog();
    log.child({ keyId: 'key-1' }).emit('key.rolled');

    log.emit('run.finished');

    expect(log.events[1]).not.toHaveProperty('keyId');
  });

  it('lets a field replace a context value without writing the key twice', () => {
    const log = createMemoryAuditLog();

    log.child({ keyId: 'key-1', organizationId: 'org-1' }).emit('key.skipped', { keyId: 'key-2' });

    expect(log.events[0]).toMatchObject({ keyId: 'key-2', organizationId: 'org-1' });
    expect(log.lines[0]!.match(/"keyId"/g)).toHaveLength(1);
  });

  it('leaves undefined context values off the line', () => {
    const log = createMemoryAuditLog();

    log.child({ keyId: 'key-1', actor: undefined }).emit('key.rolled');

    expect(log.events[0]).not.toHaveProperty('actor');
  });
});

describe('createAuditLog: errors', () => {
  it('writes code, message and cause of an error, and no stack', () => {
    const log = createMemoryAuditLog();
    const error = new KeyrollError('KR_BACKEND_UNAVAILABLE', 'vault answered 503', {
      cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
    });

    log.emit('key.store.retry', { err: error });

    expect(log.events[0]!.err).toEqual({
      type: 'KeyrollError',
      errorCode: 'KR_BACKEND_UNAVAILABLE',
      errorMessage: 'vault answered 503',
      cause: { type: 'Error', errorMessage: 'socket hang up', errorCode: 'ECONNRESET' },
    });
    expect(log.lines[0]).not.toContain('at ');
  });
});

describe('createNullAuditLog', () => {
  it('accepts events and children and writes nothing', () => {
    const log = createNullAuditLog();

    expect(() => {
      log.child({ keyId: 'k' }).emit('key.failed', { step: 'store' });
    }).not.toThrow();
    expect(log.child({})).toBe(log);
  });
});

describe('AUDIT_REDACT_PATHS', () => {
  it('censors fields that must never hold a value, at the top level and one level down', () => {
    const log = createMemoryAuditLog();

    log.emit('key.probe', {
      token: 'hvs.vault-token-value',
      apiKey: 'plain-api-key-value',
      key: 'data-key-value',
      password: 'hunter2-hunter2',
      secret: 'plain-secret-value',
      routingKey: 'pd-routing-key-value',
      webhookUrl: 'https://hooks.slack.com/services/T/B/X',
      request: { authorization: 'Bearer abc', token: 'nested-token-value' },
      headers: { 'x-api-key': 'header-api-key', cookie: 'session=1' },
      error: { headers: { authorization: 'Bearer deep' } },
    });

    const event = log.events[0]!;
    for (const field of ['token', 'apiKey', 'key', 'password', 'secret', 'routingKey', 'webhookUrl']) {
      expect(event[field], field).toBe('[REDACTED]');
    }
    expect(event.request).toEqual({ authorization: '[REDACTED]', token: '[REDACTED]' });
    expect(event.headers).toEqual({ 'x-api-key': '[REDACTED]', cookie: '[REDACTED]' });
    expect(event.error).toEqual({ headers: { authorization: '[REDACTED]' } });
  });

  it('lists each censored name at the top level and under one wildcard', () => {
    expect(AUDIT_REDACT_PATHS).toEqual(
      expect.arrayContaining([
        'authorization',
        '*.authorization',
        '*.headers.authorization',
        'apiKey',
        '*.apiKey',
        'token',
        '*.token',
      ]),
    );
  });

  it('leaves ordinary fields alone', () => {
    const log = createMemoryAuditLog();

    log.emit('key.stored', { backend: 'vault', path: 'secret/app', version: '3', keyIdHint: 'k' });

    expect(log.events[0]).toMatchObject({ backend: 'vault', path: 'secret/app', version: '3' });
  });
});
