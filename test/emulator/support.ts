// Shared helpers for the emulator tests: a real emulator on a free loopback port with an
// injected clock, and a small HTTP caller over undici that returns status, headers and body.
import { request } from 'undici';
import { expect } from 'vitest';
import { API_ERROR_CODES } from '../../src/emulator/errors.ts';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';

export const OWNER = 'demo-owner-token';
export const ADMIN = 'demo-admin-token';
export const MEMBER = 'demo-member-token';

/** A controllable clock starting on a minute boundary (rate-limit windows are whole minutes). */
export class TestClock {
  now = Date.UTC(2030, 0, 1, 0, 0, 0);
  readonly read = (): number => this.now;
  advance(ms: number): void {
    this.now += ms;
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  body: unknown;
}

export interface CallOptions {
  token?: string;
  json?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

export class Api {
  readonly base: string;

  constructor(base: string) {
    this.base = base;
  }

  async call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined = options.rawBody;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const res = await request(`${this.base}${path}`, { method: method as 'GET', headers, body });
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.statusCode, headers: res.headers, text, body: parsed };
  }

  roll(keyId: string, token: string | undefined, query = ''): Promise<Answer> {
    return this.call('POST', `/v1/auth/keys/${keyId}/roll${query}`, token === undefined ? {} : { token });
  }

  list(query: string, token: string | undefined): Promise<Answer> {
    return this.call('GET', `/v1/projects${query}`, token === undefined ? {} : { token });
  }

  updateProject(
    projectId: string,
    token: string | undefined,
    json: unknown,
    method = 'PATCH',
  ): Promise<Answer> {
    return this.call(method, `/v1/projects/${projectId}`, {
      json,
      ...(token === undefined ? {} : { token }),
    });
  }

  updateConsent(
    projectId: string,
    token: string | undefined,
    json: unknown,
    method = 'PATCH',
  ): Promise<Answer> {
    return this.call(method, `/v1/projects/${projectId}/consent`, {
      json,
      ...(token === undefined ? {} : { token }),
    });
  }
}

export interface EmulatorEnv {
  emu: RunningEmulator;
  api: Api;
  clock: TestClock;
}

export async function startTestEmulator(options: StartEmulatorOptions = {}): Promise<EmulatorEnv> {
  const clock = new TestClock();
  const emu = await startEmulator({ now: clock.read, ...options });
  return { emu, api: new Api(emu.url), clock };
}

/** Asserts the spec's error envelope with the given status and code. */
export function expectError(answer: Answer, status: number, code: string): void {
  expect({ status: answer.status, code: errorOf(answer).code }).toEqual({ status, code });
  expect(answer.body).toMatchObject({
    success: false,
    error: { code, message: expect.any(String) as unknown },
  });
  expect(API_ERROR_CODES).toContain(code);
  expect(String(answer.headers['content-type'])).toMatch(/^application\/json/);
}

export function errorOf(answer: Answer): { code?: string; message?: string; details?: unknown } {
  const body = answer.body as { error?: { code?: string; message?: string; details?: unknown } } | undefined;
  return body?.error ?? {};
}

/** The `data` of a 200 answer, typed as the caller expects (the caller's assertions check it). */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- T only names the expected shape
export function dataOf<T>(answer: Answer): T {
  expect(answer.status).toBe(200);
  return (answer.body as { data: T }).data;
}

/** Sends `count` calls, `width` at a time, and returns the statuses in order. */
export async function burst(count: number, send: () => Promise<Answer>, width = 50): Promise<number[]> {
  const statuses: number[] = [];
  for (let done = 0; done < count; done += width) {
    const batch = await Promise.all(Array.from({ length: Math.min(width, count - done) }, send));
    statuses.push(...batch.map((a) => a.status));
  }
  return statuses;
}
