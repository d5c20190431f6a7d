// Invariant 3 for the client: the new secret leaves only through Secret.reveal(). Neither the
// RolledKey's printable forms nor any error built from a roll answer may contain it.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { JSON_HEADERS, mockApi } from './mock-api.ts';

const SECRET = 'kmk_live_REDACTIONprobeREDACTIONprobe0042';
const ROLL_PATH = '/v1/auth/keys/key_a/roll';

function everyPrintableForm(value: unknown): string {
  const forms = [
    String(value),
    JSON.stringify({ value }),
    inspect(value, { depth: Infinity, showHidden: true }),
    inspect(value),
  ];
  if (value instanceof ApiError) {
    forms.push(value.message, value.stack ?? '', JSON.stringify(value.toFields()));
    let cause: unknown = value.cause;
    while (cause !== undefined) {
      forms.push(inspect(cause, { depth: Infinity }));
      cause = cause instanceof Error ? cause.cause : undefined;
    }
  }
  return forms.join('\n');
}

describe('a RolledKey', () => {
  it('never prints its secret through String, JSON or inspect', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(200, { success: true, data: { key: SECRET, keyId: 'key_a' } }, { headers: JSON_HEADERS });
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.secret.reveal()).toBe(SECRET);
    expect(String(rolled.secret)).toBe('[Secret]');
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions -- the template form is what is under test
    expect(`${rolled.secret}`).toBe('[Secret]');
    expectNoSecrets([everyPrintableForm(rolled)], [SECRET]);
    await api.done();
  });

  it('keeps the secret out of the malformed description', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(
        200,
        { success: 'yes', data: { key: SECRET, keyId: 42 } },
        { headers: { 'content-type': 'text/html' } },
      );
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.malformed).toBeDefined();
    expectNoSecrets([everyPrintableForm(rolled)], [SECRET]);
    await api.done();
  });
});

describe('errors from roll answers that contain the secret', () => {
  it.each([
    [
      'truncated JSON right after the secret',
      200,
      'application/json',
      `{"success":true,"data":{"key":"${SECRET}"`,
    ],
    ['an HTML page quoting it', 200, 'text/html', `<html><pre>key=${SECRET}</pre></html>`],
    ['plain text', 200, 'text/plain', SECRET],
    [
      'a non-string data.key with the secret beside it',
      200,
      'application/json',
      JSON.stringify({ success: true, data: { key: 7, raw: SECRET } }),
    ],
    ['a 502 page quoting it', 502, 'text/html', `<html>upstream said ${SECRET}</html>`],
    ['a 400 that is not the envelope', 400, 'application/json', JSON.stringify({ oops: SECRET })],
  ])('never carry it for %s', async (_name, status, contentType, body) => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(status, body, { headers: { 'content-type': contentType } });
    const error = await api.client.rollKey('key_a').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ApiError);
    expectNoSecrets([everyPrintableForm(error)], [SECRET]);
    await api.done();
  });
});
