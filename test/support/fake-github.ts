// A loopback GitHub for the leak intake tests, pinned to GitHub's published artifacts so it cannot
// drift from the real shapes. Both come from test/fixtures/github/secret-scanning.json, an extract
// of GitHub's OpenAPI description (@octokit/openapi) and of @octokit/webhooks-examples, with the
// versions named in its `source` (scripts/refresh-github-schema.ts writes it; see the README there):
// - REST answers (GET and PATCH of /repos/{owner}/{repo}/secret-scanning/alerts/{n}) and the
//   PATCH body keyroll sends are validated against the OpenAPI component schemas, with ajv;
// - webhook payloads are validated against the same description's x-webhooks schema
//   `webhook-secret-scanning-alert-*`. The webhooks examples have no secret_scanning_alert
//   example, so a payload is assembled from real pieces: the alert of the OpenAPI example
//   `secret-scanning-alert-open` (minus `secret`, which webhooks never carry) and the repository
//   and sender of the code_scanning_alert webhook example.
// The list endpoints (organization, repository, enterprise) page by cursor as GitHub does (a Link
// header rel="next" carrying `after`), answer If-None-Match with 304, send X-RateLimit-* on every
// answer (a 304 spends nothing) and can answer a rate limit (403/429, Retry-After) on demand.
// Each listed item is the REST alert (checked like the GET answer) plus, for the organization
// and enterprise lists, its `repository`.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

const EXTRACT = new URL('../fixtures/github/secret-scanning.json', import.meta.url);

interface GithubExtract {
  components: {
    schemas: Record<string, unknown>;
    examples: Record<string, { value: Record<string, unknown> }>;
  };
  webhookExamples: {
    code_scanning_alert: {
      repository: Record<string, unknown> & { owner: Record<string, unknown> };
      sender: unknown;
    };
  };
}

let spec: GithubExtract | undefined;
let ajv: Ajv | undefined;
const validators = new Map<string, ValidateFunction>();

function githubExtract(): GithubExtract {
  spec ??= JSON.parse(readFileSync(EXTRACT, 'utf8')) as GithubExtract;
  return spec;
}

/** A validator for one component schema of GitHub's OpenAPI description (OpenAPI 3.0: `nullable`). */
export function githubSchema(name: string): ValidateFunction {
  const cached = validators.get(name);
  if (cached) return cached;
  if (!(name in githubExtract().components.schemas))
    throw new Error(
      `${name} is not in the GitHub schema extract: add it to SCHEMA_ROOTS in scripts/refresh-github-schema.ts and run it`,
    );
  if (ajv === undefined) {
    ajv = new Ajv({ strict: false, allErrors: true });
    const addFormats = addFormatsModule as unknown as (instance: Ajv) => Ajv;
    addFormats(ajv);
    // Only the component schemas: the refs inside are `#/components/schemas/...` of this document.
    ajv.addSchema(
      { components: { schemas: nullableEnums(structuredClone(githubExtract().components.schemas)) } },
      'github',
    );
  }
  const validate = ajv.compile({ $ref: `github#/components/schemas/${name}` });
  validators.set(name, validate);
  return validate;
}

/**
 * OpenAPI 3.0's `nullable: true` admits null; ajv applies it to `type` but still checks `enum`,
 * where GitHub lists no null (e.g. an open alert's `resolution: null`). Read as OpenAPI tools do.
 */
function nullableEnums<T>(node: T): T {
  // Depth first, so a node rewritten into anyOf is not walked again.
  if (Array.isArray(node)) {
    for (const item of node) nullableEnums(item);
  } else if (typeof node === 'object' && node !== null) {
    const record = node as Record<string, unknown>;
    for (const value of Object.values(record)) nullableEnums(value);
    if (record.nullable === true && Array.isArray(record.enum) && !record.enum.includes(null))
      record.enum.push(null);
    if (record.nullable === true && record.type === undefined) {
      // ajv reads `nullable` only beside `type` (e.g. a nullable allOf): the same meaning as anyOf null.
      const { nullable: _nullable, ...inner } = record;
      for (const key of Object.keys(record)) Reflect.deleteProperty(record, key);
      record.anyOf = [inner, { type: 'null' }];
    }
  }
  return node;
}

export function schemaErrors(validate: ValidateFunction, value: unknown): string[] {
  return validate(value)
    ? []
    : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message ?? ''}`);
}

/** A secret_scanning_alert webhook payload for `action`, checked against GitHub's webhook schema. */
export function secretScanningWebhook(
  action: 'created' | 'reopened' | 'publicly_leaked' | 'validated' | 'resolved',
  options: { number: number; owner: string; repo: string },
): Record<string, unknown> {
  const codeScanning = githubExtract().webhookExamples.code_scanning_alert;
  const restAlert = structuredClone(githubExtract().components.examples['secret-scanning-alert-open']?.value);
  if (restAlert === undefined)
    throw new Error('no secret-scanning-alert-open example in the GitHub schema extract');
  const { secret: _secret, metadata: _metadata, ...alert } = restAlert;
  const repository = structuredClone(codeScanning.repository);
  repository.name = options.repo;
  repository.full_name = `${options.owner}/${options.repo}`;
  repository.owner.login = options.owner;
  const payload = {
    action,
    alert: {
      ...alert,
      number: options.number,
      html_url: `https://github.com/${options.owner}/${options.repo}/security/secret-scanning/${options.number}`,
      url: `https://api.github.com/repos/${options.owner}/${options.repo}/secret-scanning/alerts/${options.number}`,
      secret_type: 'keyroll_api_key',
      secret_type_display_name: 'keyroll API key',
    },
    repository,
    sender: codeScanning.sender,
  };
  const errors = schemaErrors(
    githubSchema(`webhook-secret-scanning-alert-${action.replace('_', '-')}`),
    payload,
  );
  if (errors.length > 0)
    throw new Error(`the webhook payload does not match GitHub's schema: ${errors.join('; ')}`);
  return payload;
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface FakeAlert {
  owner: string;
  repo: string;
  number: number;
  state: 'open' | 'resolved';
  /** The leaked value GitHub found; served only in the GET answer's `secret`. */
  secret: string;
  resolution?: string | null;
  resolutionComment?: string | null;
  /** Default keyroll_api_key. */
  secretType?: string;
}

export interface FakeRateLimit {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
}

export interface FakeGithub {
  readonly url: string;
  readonly token: string;
  readonly requests: ReceivedRequest[];
  /** Answers that failed GitHub's schema (a fake that drifted), and PATCH bodies that did. */
  readonly schemaProblems: string[];
  alerts: Map<string, FakeAlert>;
  addAlert(alert: FakeAlert): void;
  /** The token's budget: every answer but a 304 spends one; sent as X-RateLimit-* on every answer. */
  rate: FakeRateLimit;
  /** Alerts per list page at most (GitHub: per_page, at most 100). */
  pageSize: number;
  /** The next `count` list requests are answered with this rate limit instead. */
  limitNextLists(count: number, answer: { status: 403 | 429; retryAfterSeconds?: number }): void;
  /** Resolves after `count` list requests have been answered. */
  listed(count: number): Promise<void>;
  /** Resolves when a PATCH for this alert arrived. */
  patched(owner: string, repo: string, number: number): Promise<ReceivedRequest>;
  close(): Promise<void>;
}

const TOKEN = 'ghp_fake_github_token_for_leak_intake_tests_0001';

export async function startFakeGithub(): Promise<FakeGithub> {
  const requests: ReceivedRequest[] = [];
  const schemaProblems: string[] = [];
  const alerts = new Map<string, FakeAlert>();
  const waiters = new Map<string, (request: ReceivedRequest) => void>();
  const patchedRequests = new Map<string, ReceivedRequest>();
  const rate: FakeRateLimit = { limit: 5000, remaining: 5000, reset: Math.floor(Date.now() / 1000) + 3600 };
  const state = {
    pageSize: 100,
    limited: 0,
    limitAnswer: { status: 429 as 403 | 429, retryAfterSeconds: undefined as number | undefined },
    lists: 0,
  };
  const listWaiters: { count: number; resolve: () => void }[] = [];
  const rateHeaders = (spent: boolean): Record<string, string> => {
    if (spent) rate.remaining = Math.max(0, rate.remaining - 1);
    return {
      'x-ratelimit-limit': String(rate.limit),
      'x-ratelimit-remaining': String(rate.remaining),
      'x-ratelimit-reset': String(rate.reset),
      'x-ratelimit-resource': 'core',
    };
  };
  const countList = (): void => {
    state.lists++;
    for (const waiter of listWaiters.filter((w) => w.count <= state.lists)) {
      listWaiters.splice(listWaiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const received: ReceivedRequest = {
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(received);
      const send = (status: number, body: unknown, extra: Record<string, string> = {}): void => {
        response.writeHead(status, {
          'content-type': 'application/json; charset=utf-8',
          ...rateHeaders(true),
          ...extra,
        });
        response.end(JSON.stringify(body));
      };
      if (request.headers.authorization !== `Bearer ${TOKEN}`) {
        send(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
        return;
      }
      const list =
        /^\/(?:orgs\/([^/]+)|repos\/([^/]+)\/([^/]+)|enterprises\/([^/]+))\/secret-scanning\/alerts(\?.*)?$/.exec(
          received.url,
        );
      if (list && received.method === 'GET') {
        answerList(received, response, { org: list[1], owner: list[2], repo: list[3] });
        countList();
        return;
      }
      const match = /^\/repos\/([^/]+)\/([^/]+)\/secret-scanning\/alerts\/(\d+)$/.exec(received.url);
      const id = match ? `${match[1]}/${match[2]}#${match[3]}` : '';
      const alert = alerts.get(id);
      if (!match || !alert) {
        send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
        return;
      }
      if (received.method === 'PATCH') {
        const body = JSON.parse(received.body) as {
          state?: 'open' | 'resolved';
          resolution?: string;
          resolution_comment?: string;
        };
        const problems = schemaErrors(githubSchema('secret-scanning-alert-state'), body.state);
        if (body.resolution !== undefined)
          problems.push(...schemaErrors(githubSchema('secret-scanning-alert-resolution'), body.resolution));
        schemaProblems.push(...problems.map((p) => `PATCH body: ${p}`));
        if (body.state === 'resolved' && body.resolution === undefined) {
          send(422, { message: 'resolution is required when state is resolved' });
          return;
        }
        if (body.state) alert.state = body.state;
        alert.resolution = body.resolution ?? null;
        alert.resolutionComment = body.resolution_comment ?? null;
      } else if (received.method !== 'GET') {
        send(404, { message: 'Not Found' });
        return;
      }
      const answer = restAlert(alert, received.method === 'GET');
      schemaProblems.push(
        ...schemaErrors(githubSchema('secret-scanning-alert-with-metadata'), answer).map(
          (p) => `${received.method} answer: ${p}`,
        ),
      );
      send(200, answer);
      if (received.method === 'PATCH') {
        patchedRequests.set(id, received);
        waiters.get(id)?.(received);
      }
    });
  });
  /** GET .../secret-scanning/alerts: open alerts of the secret types asked, one page by cursor. */
  // An enterprise's list is every alert here: the fake has one enterprise.
  function answerList(
    received: ReceivedRequest,
    res: ServerResponse,
    scope: { org?: string | undefined; owner?: string | undefined; repo?: string | undefined },
  ): void {
    if (state.limited > 0) {
      state.limited--;
      const retry = state.limitAnswer.retryAfterSeconds;
      res.writeHead(state.limitAnswer.status, {
        'content-type': 'application/json; charset=utf-8',
        ...rateHeaders(true),
        ...(retry === undefined ? {} : { 'retry-after': String(retry) }),
      });
      res.end(
        JSON.stringify({
          message:
            'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
          documentation_url: 'https://docs.github.com/rest',
        }),
      );
      return;
    }
    const url = new URL(received.url, 'http://fake');
    const types = (url.searchParams.get('secret_type') ?? '').split(',').filter((t) => t !== '');
    const wantedState = url.searchParams.get('state');
    const hide = url.searchParams.get('hide_secret') === 'true';
    const perPage = Math.min(Number(url.searchParams.get('per_page') ?? '30'), 100, state.pageSize);
    const after = url.searchParams.get('after') ?? '';
    const matching = [...alerts.values()]
      .filter(
        (alert) =>
          (scope.org === undefined || alert.owner === scope.org) &&
          (scope.owner === undefined || (alert.owner === scope.owner && alert.repo === scope.repo)),
      )
      .filter(
        (alert) =>
          (wantedState === null || alert.state === wantedState) &&
          (types.length === 0 || types.includes(alert.secretType ?? 'keyroll_api_key')),
      )
      .sort((a, b) =>
        `${a.owner}/${a.repo}#${String(a.number).padStart(9, '0')}`.localeCompare(
          `${b.owner}/${b.repo}#${String(b.number).padStart(9, '0')}`,
        ),
      );
    const start = after === '' ? 0 : Number(Buffer.from(after, 'base64url').toString('utf8'));
    const page = matching.slice(start, start + perPage);
    const items = page.map((alert) => {
      const item = restAlert(alert, !hide);
      schemaProblems.push(
        ...schemaErrors(githubSchema('secret-scanning-alert-with-metadata'), item).map(
          (p) => `list item: ${p}`,
        ),
      );
      return scope.owner === undefined ? { ...item, repository: listRepository(alert) } : item;
    });
    const body = JSON.stringify(items);
    const etag = `W/"${createHash('sha256').update(body).digest('hex')}"`;
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', etag };
    if (start + perPage < matching.length) {
      const next = new URL(url.toString());
      next.searchParams.set('after', Buffer.from(String(start + perPage), 'utf8').toString('base64url'));
      headers.link = `<${baseUrl}${next.pathname}${next.search}>; rel="next"`;
    }
    // A conditional request that matches costs nothing (GitHub: when made with an Authorization header).
    if (received.headers['if-none-match'] === etag) {
      res.writeHead(304, { etag, ...rateHeaders(false) });
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, ...rateHeaders(true) });
    res.end(body);
  }
  let baseUrl = '';
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;
  return {
    url: `http://127.0.0.1:${port}`,
    token: TOKEN,
    requests,
    schemaProblems,
    alerts,
    rate,
    get pageSize() {
      return state.pageSize;
    },
    set pageSize(size: number) {
      state.pageSize = size;
    },
    limitNextLists: (count, answer) => {
      state.limited = count;
      state.limitAnswer = { status: answer.status, retryAfterSeconds: answer.retryAfterSeconds };
    },
    listed: (count) =>
      state.lists >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => listWaiters.push({ count, resolve })),
    addAlert: (alert) => alerts.set(`${alert.owner}/${alert.repo}#${alert.number}`, alert),
    patched: (owner, repo, number) => {
      const id = `${owner}/${repo}#${number}`;
      const done = patchedRequests.get(id);
      if (done) return Promise.resolve(done);
      return new Promise((resolve) => waiters.set(id, resolve));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

/** GitHub's REST shape of an alert (the OpenAPI example, made to describe `alert`). */
function restAlert(alert: FakeAlert, withSecret: boolean): Record<string, unknown> {
  const example = structuredClone(
    githubExtract().components.examples['secret-scanning-alert-open']?.value ?? {},
  );
  const base = `https://api.github.com/repos/${alert.owner}/${alert.repo}/secret-scanning/alerts/${alert.number}`;
  const resolved = alert.state === 'resolved';
  const { secret: _secret, ...withoutSecret } = example;
  return {
    ...(withSecret ? example : withoutSecret),
    number: alert.number,
    url: base,
    html_url: `https://github.com/${alert.owner}/${alert.repo}/security/secret-scanning/${alert.number}`,
    locations_url: `${base}/locations`,
    state: alert.state,
    resolution: resolved ? (alert.resolution ?? null) : null,
    resolved_at: resolved ? '2026-01-01T00:00:00Z' : null,
    resolution_comment: alert.resolutionComment ?? null,
    secret_type: alert.secretType ?? 'keyroll_api_key',
    secret_type_display_name: 'keyroll API key',
    ...(withSecret ? { secret: alert.secret } : {}),
  };
}

/** The `repository` of an organization or enterprise list item: the webhook example's, renamed. */
function listRepository(alert: FakeAlert): Record<string, unknown> {
  const repository = structuredClone(githubExtract().webhookExamples.code_scanning_alert.repository);
  repository.name = alert.repo;
  repository.full_name = `${alert.owner}/${alert.repo}`;
  repository.owner.login = alert.owner;
  return repository;
}
