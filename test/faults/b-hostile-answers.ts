// fast-check arbitraries for hostile roll answers, and the oracle saying what keyroll must do
// with each. An answer is a status (with whether the API applied the roll before answering), a
// content type, a body built around the freshly minted secret (or a fake one when nothing was
// minted), and a way of delivering it: whole, dripped slowly to the end, dripped forever,
// never answered, cut mid-body, or reset.
import fc from 'fast-check';

export type Delivery = 'whole' | 'drip' | 'drip-forever' | 'no-headers' | 'cut-mid-body' | 'reset';

export interface BodyKind {
  label: string;
  /** The body around `key` (the minted secret when the roll applied, else a fake) for `keyId`. */
  render(key: string, keyId: string): string;
}

export interface HostileAnswer {
  status: number;
  /** The API rolled the key (old secret dead, new one minted) before answering. */
  applies: boolean;
  contentType: string | undefined;
  body: BodyKind;
  delivery: Delivery;
  retryAfter?: string;
}

/** keyroll's cap on a response body (src/api/http.ts MAX_RESPONSE_BYTES). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

const spec = (key: string, keyId: string): Record<string, unknown> => ({
  success: true,
  data: { key, keyId },
});
const json = (value: unknown): string => JSON.stringify(value);
const odd = fc.oneof(
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.constant([]),
  fc.constant({}),
  fc.constant(''),
);

export interface BodyFamily {
  name: string;
  /** The secret can be read at `data.key` (whatever else is wrong). */
  readable: boolean;
  body: fc.Arbitrary<BodyKind>;
}

const family = (
  name: string,
  readable: boolean,
  body: fc.Arbitrary<BodyKind> | BodyKind['render'],
): BodyFamily => ({
  name,
  readable,
  body: typeof body === 'function' ? fc.constant({ label: name, render: body }) : body,
});

/** Bodies that carry the secret readably at `data.key` (the rest may be wrong). */
const KEYED: readonly BodyFamily[] = [
  family('spec body', true, (k, id) => json(spec(k, id))),
  family('extra fields everywhere', true, (k, id) =>
    json({
      success: true,
      data: { key: k, keyId: id, name: 'billing', scopes: ['read'], createdAt: 1_700_000_000 },
      meta: { requestId: 'r-1' },
      links: [1, 2],
    }),
  ),
  family('data.keyId names another key', true, (k) => json(spec(k, 'key_someone_else'))),
  family(
    'data.keyId of a wrong type',
    true,
    odd.map((value): BodyKind => ({
      label: `data.keyId is ${json(value)}`,
      render: (k) => json({ success: true, data: { key: k, keyId: value } }),
    })),
  ),
  family('data.keyId missing', true, (k) => json({ success: true, data: { key: k } })),
  family(
    'success wrong or missing',
    true,
    fc.constantFrom<unknown>(false, 'true', 1, undefined).map((value): BodyKind => ({
      label: `success is ${value === undefined ? 'missing' : json(value)}`,
      render: (k, id) =>
        json({ ...(value === undefined ? {} : { success: value }), data: { key: k, keyId: id } }),
    })),
  ),
  family(
    'a decoy data.key before the real one',
    true,
    (k, id) =>
      `{"success":true,"data":{"key":"kmk_live_decoy_not_minted","keyId":${json(id)},"key":${json(k)}}}`,
  ),
  family(
    'the secret \\u-escaped',
    true,
    (k, id) =>
      `{"success":true,"data":{"keyId":${json(id)},"key":"${Array.from({ length: k.length }, (_, i) => `\\u${k.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')}"}}`,
  ),
  family(
    'MiB of padding beside data',
    true,
    fc.integer({ min: 1, max: 3 }).map((mib): BodyKind => ({
      label: `${mib} MiB of padding beside data`,
      render: (k, id) => json({ ...spec(k, id), padding: 'x'.repeat(mib * 1024 * 1024) }),
    })),
  ),
  family(
    'nesting 500 deep beside data',
    true,
    (k, id) =>
      `{"success":true,"data":{"key":${json(k)},"keyId":${json(id)}},"deep":${'['.repeat(500)}${']'.repeat(500)}}`,
  ),
  family('pretty-printed with CRLF', true, (k, id) =>
    JSON.stringify(spec(k, id), null, 2).replaceAll('\n', '\r\n'),
  ),
];

/** Bodies from which no secret can be read. */
const UNREADABLE: readonly BodyFamily[] = [
  family(
    'spec body truncated',
    false,
    fc.double({ min: 0.05, max: 0.95, noNaN: true }).map((at): BodyKind => ({
      label: `spec body truncated at ${Math.round(at * 100)}%`,
      render: (k, id) => {
        const whole = json(spec(k, id));
        return whole.slice(0, Math.max(1, Math.floor(whole.length * at)));
      },
    })),
  ),
  family(
    'spec body then junk',
    false,
    fc.constantFrom('}', 'garbage', ',', '{}').map((tail): BodyKind => ({
      label: `spec body then ${json(tail)}`,
      render: (k, id) => json(spec(k, id)) + tail,
    })),
  ),
  family('single quotes', false, (k, id) => json(spec(k, id)).replaceAll('"', "'")),
  family('byte order mark first', false, (k, id) => `\uFEFF${json(spec(k, id))}`),
  family(
    'HTML page showing the key',
    false,
    (k) => `<html><body><h1>Your new key</h1><pre>${k}</pre></body></html>`,
  ),
  family('plain text key=', false, (k) => `key=${k}\n`),
  family('empty body', false, () => ''),
  family(
    'data.key of a wrong type',
    false,
    odd.map((value): BodyKind => ({
      label: `data.key is ${json(value)}`,
      render: (_k, id) => json({ success: true, data: { key: value, keyId: id } }),
    })),
  ),
  family('data missing', false, () => json({ success: true })),
  family('data is a list', false, (k, id) => json({ success: true, data: [{ key: k, keyId: id }] })),
  family(
    'not an object',
    false,
    fc
      .constantFrom('[]', '"ok"', '42', 'null', 'true')
      .map((text): BodyKind => ({ label: `top-level ${text}`, render: () => text })),
  ),
  family('over the 4 MiB cap', false, (k, id) =>
    json({ ...spec(k, id), padding: 'x'.repeat(MAX_BODY_BYTES + 1024) }),
  ),
  family('error envelope on a success status', false, () =>
    json({ success: false, error: { code: 'INTERNAL_ERROR', message: 'boom' } }),
  ),
  family('a trailing comment', false, (k, id) => `${json(spec(k, id))} // rolled`),
];

/** Every body family; the suite draws the same number of answers from each. */
export const BODY_FAMILIES: readonly BodyFamily[] = [...KEYED, ...UNREADABLE];

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/problem+json',
  'text/html',
  'text/plain',
  'application/octet-stream',
  undefined,
] as const;
const contentType = fc.oneof(
  { arbitrary: fc.constant<string | undefined>('application/json'), weight: 3 },
  { arbitrary: fc.constantFrom<string | undefined>(...CONTENT_TYPES), weight: 2 },
);

const delivery = (huge: boolean): fc.Arbitrary<Delivery> =>
  huge
    ? fc.constant<Delivery>('whole')
    : fc.oneof(
        { arbitrary: fc.constant<Delivery>('whole'), weight: 5 },
        {
          arbitrary: fc.constantFrom<Delivery>('drip', 'drip-forever', 'no-headers', 'cut-mid-body', 'reset'),
          weight: 5,
        },
      );

const isHuge = (body: BodyKind): boolean => body.label.includes('MiB');

function answerWith(
  status: number,
  applies: boolean,
  bodies: fc.Arbitrary<BodyKind>,
): fc.Arbitrary<HostileAnswer> {
  return fc.tuple(bodies, contentType).chain(([body, type]) =>
    delivery(isHuge(body)).map((how): HostileAnswer => ({
      status,
      applies,
      contentType: type,
      body,
      delivery: how,
    })),
  );
}

/**
 * Answers with a body of `bodyFamily`. A 2xx always follows an applied roll; a 5xx may or may
 * not (and when not, carries no readable key: nothing was minted); a 4xx or 3xx never does (a
 * key-shaped value in it is a fake); a 429 is not applied either. 401 is left out: it is
 * keyroll's own credential refused, which stops the whole run.
 */
export function hostileAnswerFor(bodyFamily: BodyFamily): fc.Arbitrary<HostileAnswer> {
  const { body } = bodyFamily;
  return fc.oneof(
    {
      arbitrary: fc.constantFrom(200, 201, 202, 203).chain((status) => answerWith(status, true, body)),
      weight: 5,
    },
    {
      arbitrary: fc.constantFrom(500, 502, 503, 504).chain((status) => answerWith(status, true, body)),
      weight: 1,
    },
    {
      arbitrary: fc
        .constantFrom(500, 502, 503, 504)
        .chain((status) => answerWith(status, bodyFamily.readable, body)),
      weight: 1,
    },
    {
      arbitrary: fc
        .constantFrom(400, 403, 404, 409, 418, 422, 301, 302)
        .chain((status) => answerWith(status, false, body)),
      weight: 2,
    },
    {
      arbitrary: fc
        .tuple(fc.constantFrom('0', '1', '1.5', '-3', 'soon', 'Wed, 21 Oct 2015 07:28:00 GMT', '99999'), body)
        .map(([retryAfter, kind]): HostileAnswer => ({
          status: 429,
          applies: false,
          contentType: 'application/json',
          body: kind,
          delivery: 'whole',
          retryAfter,
        })),
      weight: 1,
    },
  );
}

export function describeAnswer(answer: HostileAnswer): string {
  const type = answer.contentType ?? 'no content-type';
  const retry = answer.retryAfter === undefined ? '' : `, Retry-After ${answer.retryAfter}`;
  return `${answer.status}${answer.applies ? ' (applied)' : ''}, ${answer.body.label}, ${type}, ${answer.delivery}${retry}`;
}

// ── the oracle ────────────────────────────────────────────────────────────────────────

export type Expected =
  /** The secret arrived readably: stored at once, one roll, `malformedAnswer` when anything else was off. */
  | { kind: 'stored-first'; malformed: boolean }
  /** The outcome was unknown: probe the stored secret, roll again, store the second secret. */
  | { kind: 'rerolled'; probe: 'rolled-and-lost' | 'not-rolled' }
  /** 429: wait and roll again (or fail when Retry-After is past the run's budget). */
  | { kind: 'rate-limited'; fails: boolean }
  /** Refused (4xx/3xx): the key fails with this code, nothing rolled, nothing stored. */
  | { kind: 'refused'; errorCode: string };

function dataKeyOf(text: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const data = typeof value === 'object' && value !== null ? (value as { data?: unknown }).data : undefined;
  const key = typeof data === 'object' && data !== null ? (data as { key?: unknown }).key : undefined;
  return typeof key === 'string' && key !== '' ? key : undefined;
}

function isJsonType(type: string | undefined): boolean {
  const media = (type ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return media === 'application/json' || media.endsWith('+json');
}

function matchesSpec(text: string, keyId: string): boolean {
  try {
    const value = JSON.parse(text) as { success?: unknown; data?: { key?: unknown; keyId?: unknown } };
    return (
      value.success === true &&
      typeof value.data?.key === 'string' &&
      value.data.key !== '' &&
      value.data.keyId === keyId
    );
  } catch {
    return false;
  }
}

const STATUS_CODES: Record<number, string> = {
  400: 'KR_API_BAD_REQUEST',
  403: 'KR_API_FORBIDDEN',
  404: 'KR_API_NOT_FOUND',
  409: 'KR_API_CONFLICT',
};

/** What keyroll must do with `answer`, whose body was `text` around the secret `minted`. */
export function expectedOutcome(
  answer: HostileAnswer,
  text: string,
  minted: string | undefined,
  keyId: string,
): Expected {
  const mayHaveRolled = (answer.status >= 200 && answer.status <= 299) || answer.status >= 500;
  const delivered =
    (answer.delivery === 'whole' || answer.delivery === 'drip') && Buffer.byteLength(text) <= MAX_BODY_BYTES;
  const readKey = delivered && mayHaveRolled ? dataKeyOf(text) : undefined;
  if (answer.applies && readKey !== undefined) {
    if (readKey !== minted)
      throw new Error(
        `generator bug: an applied answer carries a key that was not minted (${answer.body.label})`,
      );
    const offSpec =
      answer.status < 200 ||
      answer.status > 299 ||
      !isJsonType(answer.contentType) ||
      !matchesSpec(text, keyId);
    return { kind: 'stored-first', malformed: offSpec };
  }
  if (mayHaveRolled || !delivered)
    return { kind: 'rerolled', probe: answer.applies ? 'rolled-and-lost' : 'not-rolled' };
  if (answer.status === 429) return { kind: 'rate-limited', fails: answer.retryAfter === '99999' };
  return { kind: 'refused', errorCode: STATUS_CODES[answer.status] ?? 'KR_API_UNEXPECTED_STATUS' };
}
