// fast-check arbitraries for malformed policies. Each case starts from a generated VALID policy
// (1–4 keys, with or without defaults, labels, raw values, alerts) and breaks it in one way:
// a wrong type, an unknown field, a bad cron or duration, missing or empty destinations,
// duplicate key ids, an undefined backend or sink, a missing required field, a semantic rule,
// a literal secret where a reference belongs, broken YAML, a document that is not a mapping, or
// a file past the 1 MiB cap. Some cases sit under 20,000 comment lines, so line numbers are
// checked far into a large file too. Each case says which lines may carry the error.
import fc from 'fast-check';
import {
  baseDoc,
  baseShape,
  clone,
  deleteAt,
  getAt,
  lineCount,
  linesOf,
  render,
  setAt,
  type BaseShape,
  type Doc,
  type Path,
} from './b-policy-doc.ts';

export { ALERT_URL_PLACEHOLDER, BASE_URL_PLACEHOLDER } from './b-policy-doc.ts';

/** One malformed policy and what the loader must say about it. */
export interface BadPolicy {
  /** What was broken, e.g. `wrong type at keys[1].destinations`. */
  kind: string;
  /** The valid policy the case started from (proves the break is what the loader refuses). */
  validText: string;
  text: string;
  /** The loader's error code for this break. */
  code: 'KR_POLICY_SYNTAX' | 'KR_POLICY_INVALID' | 'KR_POLICY_UNREADABLE';
  /** Line ranges (1-based, inclusive) of which at least one must be named; undefined for whole-file errors (too large). */
  lines?: [number, number][];
  /** A value that must never appear in a message (a literal secret pasted into a reference field). */
  mustNotEcho?: string;
}

// ── values that are wrong for a field ─────────────────────────────────────────────────

const notText = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { minLength: 1, maxLength: 3 }),
  fc.dictionary(fc.stringMatching(/^[a-z]{1,5}$/), fc.integer(), { minKeys: 1, maxKeys: 2 }),
);
const notNumber = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { minLength: 1, maxLength: 2 }),
);
const notPositiveInt = fc.oneof(
  notNumber,
  fc.integer({ max: 0 }),
  fc.double({ min: 0.01, max: 1e6, noNaN: true }).filter((n) => !Number.isInteger(n)),
);
const notBoolean = fc.oneof(
  fc.constantFrom('true', 'yes', 'on', 'false'),
  fc.integer(),
  fc.constant(null),
  fc.array(fc.boolean(), { minLength: 1, maxLength: 2 }),
);
const badDurationText = fc.oneof(
  fc.constantFrom('30', '0s', '0ms', '-1h', '1y', '1.5h', '15 m', 'soon', '', 'h1', '9999999999999999999d'),
  fc.integer({ min: 0, max: 10_000 }),
);
const badCron = fc.oneof(
  fc.constantFrom(
    '* * *',
    'every day',
    '0 0 31 2 *',
    '0 0 30 2 *',
    '@fortnightly',
    '',
    '* * * * * * * *',
    'L L L L L',
  ),
  fc.integer({ min: 60, max: 99 }).map((m) => `${m} * * * *`),
  fc.integer({ min: 24, max: 99 }).map((h) => `0 ${h} * * *`),
  fc.integer({ min: 32, max: 99 }).map((d) => `0 0 ${d} * *`),
  fc.integer({ min: 13, max: 99 }).map((m) => `0 0 1 ${m} *`),
  fc.integer({ min: 8, max: 99 }).map((w) => `0 0 * * ${w}`),
  fc.array(fc.constant('*'), { minLength: 1, maxLength: 3 }).map((parts) => parts.join(' ')),
);

interface Broken {
  kind: string;
  doc: Doc;
  /** Where the error must be reported: the entry at each path (any of them). */
  at: Path[];
  code?: BadPolicy['code'];
  mustNotEcho?: string;
}

type Breaker = (doc: Doc, shape: BaseShape) => fc.Arbitrary<Broken>;

const keyIndex = (shape: BaseShape): fc.Arbitrary<number> => fc.integer({ min: 0, max: shape.keys - 1 });

function replaced(doc: Doc, path: Path, value: unknown, kind: string): Broken {
  const next = clone(doc);
  setAt(next, path, value);
  return { kind, doc: next, at: [path] };
}

const wrongType: Breaker = (doc, shape) =>
  fc.oneof(
    fc
      .oneof(
        fc.integer().filter((n) => n !== 1),
        fc.constant('1'),
        fc.boolean(),
        fc.constant([1]),
      )
      .map((v) => replaced(doc, ['version'], v, 'wrong type at version')),
    fc
      .oneof(notText, fc.constantFrom('not a url', 'ftp://example.com'))
      .map((v) => replaced(doc, ['api', 'baseUrl'], v, 'wrong type at api.baseUrl')),
    notPositiveInt.map((v) =>
      replaced(doc, ['api', 'timeouts', 'headersMs'], v, 'wrong type at api.timeouts.headersMs'),
    ),
    fc
      .oneof(notText, fc.constantFrom('floppy', 'File'))
      .map((v) => replaced(doc, ['backends', 'files', 'kind'], v, 'wrong type at backends.files.kind')),
    fc
      .tuple(keyIndex(shape), fc.oneof(notText, fc.constantFrom('has space', 'a/b', 'q?x', 'h#1', '')))
      .map(([i, v]) => replaced(doc, ['keys', i, 'id'], v, 'wrong type at keys[].id')),
    fc
      .tuple(keyIndex(shape), fc.oneof(notText, fc.constant('')))
      .map(([i, v]) => replaced(doc, ['keys', i, 'organization'], v, 'wrong type at keys[].organization')),
    fc
      .tuple(
        keyIndex(shape),
        fc.oneof(
          fc.string({ maxLength: 8 }),
          fc.integer(),
          fc.constant({ backend: 'files', path: 'x.json' }),
        ),
      )
      .map(([i, v]) => replaced(doc, ['keys', i, 'destinations'], v, 'wrong type at keys[].destinations')),
    fc
      .tuple(keyIndex(shape), fc.oneof(notText, fc.constant('')))
      .map(([i, v]) =>
        replaced(doc, ['keys', i, 'destinations', 0, 'path'], v, 'wrong type at keys[].destinations[].path'),
      ),
    fc
      .tuple(
        keyIndex(shape),
        fc.oneof(
          fc.string({ maxLength: 8 }),
          fc.array(fc.string(), { minLength: 1, maxLength: 2 }),
          fc.constant({ team: 5 }),
        ),
      )
      .map(([i, v]) => replaced(doc, ['keys', i, 'labels'], v, 'wrong type at keys[].labels')),
    fc
      .tuple(keyIndex(shape), notBoolean)
      .map(([i, v]) =>
        replaced(doc, ['keys', i, 'verify'], { readBack: v }, 'wrong type at keys[].verify.readBack'),
      ),
    fc
      .tuple(
        keyIndex(shape),
        fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 21 }), fc.constant('5'), fc.constant(2.5)),
      )
      .map(([i, v]) =>
        replaced(doc, ['keys', i, 'store'], { attempts: v }, 'wrong type at keys[].store.attempts'),
      ),
  );

const unknownField: Breaker = (doc, shape) => {
  const known = new Set([
    '$schema',
    'version',
    'api',
    'backends',
    'alerts',
    'escrow',
    'defaults',
    'keys',
    'baseUrl',
    'credential',
    'methods',
    'timeouts',
    'rateLimitPerMinute',
    'type',
    'token',
    'headersMs',
    'bodyMs',
    'kind',
    'directory',
    'id',
    'organization',
    'destinations',
    'fallbacks',
    'labels',
    'schedule',
    'timezone',
    'maxAge',
    'minInterval',
    'lockTtl',
    'verify',
    'store',
    'notify',
    'backend',
    'path',
    'shape',
  ]);
  const name = fc.stringMatching(/^[a-z][a-zA-Z0-9]{2,12}$/).filter((n) => !known.has(n));
  const owners: Path[] = [
    [],
    ['api'],
    ['api', 'credential'],
    ['api', 'timeouts'],
    ['backends', 'files'],
    ...Array.from({ length: shape.keys }, (_, i): Path => ['keys', i]),
    ...Array.from({ length: shape.keys }, (_, i): Path => ['keys', i, 'destinations', 0]),
  ];
  if (shape.defaults) owners.push(['defaults'], ['defaults', 'verify']);
  return fc
    .tuple(
      fc.constantFrom(...owners),
      name,
      fc.oneof(fc.integer(), fc.string({ maxLength: 6 }), fc.boolean()),
    )
    .map(([owner, field, value]) => {
      const next = clone(doc);
      (getAt(next, owner) as Doc)[field] = value;
      return {
        kind: `unknown field under ${owner.join('.') || 'the top'}`,
        doc: next,
        at: [[...owner, field]],
      };
    });
};

const settingsOwner = (shape: BaseShape): fc.Arbitrary<Path> =>
  shape.defaults
    ? fc.oneof(
        fc.constant<Path>(['defaults']),
        keyIndex(shape).map((i): Path => ['keys', i]),
      )
    : keyIndex(shape).map((i): Path => ['keys', i]);

const badSchedule: Breaker = (doc, shape) =>
  fc
    .tuple(settingsOwner(shape), badCron)
    .map(([owner, cron]) => replaced(doc, [...owner, 'schedule'], cron, 'bad cron'));

const badDuration: Breaker = (doc, shape) =>
  fc
    .tuple(settingsOwner(shape), fc.constantFrom('maxAge', 'minInterval', 'lockTtl'), badDurationText)
    .map(([owner, field, text]) => replaced(doc, [...owner, field], text, `bad duration at ${field}`));

const badTimezone: Breaker = (doc, shape) =>
  fc
    .tuple(
      settingsOwner(shape),
      fc.oneof(fc.constantFrom('Mars/Olympus_Mons', 'UTC+25', 'Europe/Atlantis', ''), fc.integer()),
    )
    .map(([owner, zone]) => replaced(doc, [...owner, 'timezone'], zone, 'bad time zone'));

const missingDestinations: Breaker = (doc, shape) =>
  fc.tuple(keyIndex(shape), fc.constantFrom('deleted', 'empty', 'null')).map(([i, how]) => {
    const next = clone(doc);
    if (how === 'deleted') {
      deleteAt(next, ['keys', i, 'destinations']);
      return { kind: 'missing destinations', doc: next, at: [['keys', i]] };
    }
    setAt(next, ['keys', i, 'destinations'], how === 'empty' ? [] : null);
    return { kind: `${how} destinations`, doc: next, at: [['keys', i, 'destinations']] };
  });

const duplicateKeyIds: Breaker = (doc, shape) =>
  fc.tuple(keyIndex(shape), keyIndex(shape)).map(([a, b]) => {
    const next = clone(doc);
    const keys = next.keys as Doc[];
    const source = keys[a] as Doc;
    if (a === b || shape.keys === 1) {
      // A second key with the same id and its own destination.
      keys.push({ ...structuredClone(source), destinations: [{ backend: 'files', path: 'dup.json' }] });
      return {
        kind: 'duplicate key id',
        doc: next,
        at: [
          ['keys', a, 'id'],
          ['keys', keys.length - 1, 'id'],
        ],
      };
    }
    (keys[b] as Doc).id = source.id;
    return {
      kind: 'duplicate key id',
      doc: next,
      at: [
        ['keys', a, 'id'],
        ['keys', b, 'id'],
      ],
    };
  });

const undefinedReference: Breaker = (doc, shape) =>
  fc.oneof(
    keyIndex(shape).map((i) =>
      replaced(doc, ['keys', i, 'destinations', 0, 'backend'], 'nowhere', 'undefined backend'),
    ),
    keyIndex(shape).map((i) =>
      replaced(doc, ['keys', i, 'notify'], { onFailure: ['no-such-sink'] }, 'undefined alert sink'),
    ),
  );

const missingRequired: Breaker = (doc, shape) =>
  fc
    .oneof(
      fc.constantFrom<Path>(
        ['version'],
        ['api'],
        ['backends'],
        ['keys'],
        ['api', 'baseUrl'],
        ['api', 'credential'],
        ['api', 'credential', 'type'],
        ['backends', 'files', 'kind'],
      ),
      keyIndex(shape).chain((i) =>
        fc.constantFrom<Path>(
          ['keys', i, 'id'],
          ['keys', i, 'organization'],
          ['keys', i, 'destinations', 0, 'backend'],
          ['keys', i, 'destinations', 0, 'path'],
        ),
      ),
    )
    .map((path) => {
      const next = clone(doc);
      deleteAt(next, path);
      return { kind: `missing ${path.join('.')}`, doc: next, at: [path.slice(0, -1)] };
    });

const semanticRule: Breaker = (doc, shape) =>
  fc.oneof(
    // Two destinations writing one file (another key's path, or a second copy in the same key).
    keyIndex(shape).map((i) => {
      const next = clone(doc);
      const keys = next.keys as Doc[];
      const other = (i + 1) % shape.keys;
      const at: Path[] = [
        ['keys', i, 'destinations'],
        ['keys', other, 'destinations'],
      ];
      (keys[i] as Doc).destinations = [{ backend: 'files', path: `k${other}.json` }];
      if (other === i)
        (keys[i] as Doc).destinations = [
          { backend: 'files', path: 'same.json' },
          { backend: 'files', path: 'same.json' },
        ];
      return { kind: 'shared destination', doc: next, at };
    }),
    fc
      .tuple(keyIndex(shape), fc.constantFrom('../outside.json', '/etc/keyroll.json', 'a/../../b.json'))
      .map(([i, path]) =>
        replaced(doc, ['keys', i, 'destinations', 0, 'path'], path, 'file path outside the directory'),
      ),
    keyIndex(shape).map((i) => {
      const next = clone(doc);
      Object.assign((next.keys as Doc[])[i] as Doc, { maxAge: '10m', minInterval: '1h' });
      return { kind: 'maxAge shorter than minInterval', doc: next, at: [['keys', i]] };
    }),
    keyIndex(shape).map((i) => {
      const next = clone(doc);
      Object.assign((next.keys as Doc[])[i] as Doc, { schedule: null, maxAge: null });
      return { kind: 'no schedule and no maxAge', doc: next, at: [['keys', i]] };
    }),
    fc
      .tuple(keyIndex(shape), fc.constantFrom('format: raw with fields', 'fields repeat'))
      .map(([i, how]) =>
        replaced(
          doc,
          ['keys', i, 'destinations', 0, 'shape'],
          how === 'fields repeat' ? { fields: ['keyId', 'keyId'] } : { format: 'raw', fields: ['keyId'] },
          `bad shape: ${how}`,
        ),
      ),
  );

const literalSecret: Breaker = (doc) =>
  fc.stringMatching(/^[A-Za-z0-9]{24,40}$/).map((literal) => ({
    ...replaced(
      doc,
      ['api', 'credential', 'token'],
      `tok_${literal}`,
      'literal token instead of a reference',
    ),
    mustNotEcho: `tok_${literal}`,
  }));

const BREAKERS: readonly Breaker[] = [
  wrongType,
  unknownField,
  badSchedule,
  badDuration,
  badTimezone,
  missingDestinations,
  duplicateKeyIds,
  undefinedReference,
  missingRequired,
  semanticRule,
  literalSecret,
];

/** A structural break: the text re-rendered, the lines located in it. */
const structuralCase: fc.Arbitrary<BadPolicy> = baseShape.chain((shape) => {
  const doc = baseDoc(shape);
  return fc.oneof(...BREAKERS.map((breaker) => breaker(doc, shape))).map((broken): BadPolicy => {
    const text = render(broken.doc, shape.padding);
    const lines = broken.at
      .map((path) => linesOf(text, path))
      .filter((range): range is [number, number] => range !== undefined);
    return {
      kind: broken.kind,
      validText: render(doc, shape.padding),
      text,
      code: broken.code ?? 'KR_POLICY_INVALID',
      lines: lines.length > 0 ? lines : [[1, lineCount(text)]],
      ...(broken.mustNotEcho ? { mustNotEcho: broken.mustNotEcho } : {}),
    };
  });
});

/** Broken YAML: a line inserted before a top-level entry (or at the end). */
const syntaxCase: fc.Arbitrary<BadPolicy> = fc
  .tuple(
    baseShape,
    fc.constantFrom(
      'tab indentation',
      'unclosed flow sequence',
      'unclosed quote',
      'duplicate top-level key',
      'stray mapping value',
      'unresolved alias',
    ),
    fc.nat(),
  )
  .map(([shape, how, pick]) => {
    const validText = render(baseDoc(shape), shape.padding);
    const lines = validText.split('\n');
    const starts = lines
      .map((line, index) => (/^[a-z]/.test(line) ? index : -1))
      .filter((index) => index >= 0);
    starts.push(lines.length - 1);
    const at = starts[pick % starts.length] ?? 0;
    const inserted = {
      'tab indentation': '\tbroken: true',
      'unclosed flow sequence': 'broken: [1, 2',
      'unclosed quote': 'broken: "abc',
      'duplicate top-level key': 'version: 1',
      'stray mapping value': 'broken: a: b: c',
      'unresolved alias': 'broken: *nowhere',
    }[how];
    const text = [...lines.slice(0, at), inserted, ...lines.slice(at)].join('\n');
    return {
      kind: `YAML: ${how}`,
      validText,
      text,
      code: 'KR_POLICY_SYNTAX' as const,
      lines: [[1, lineCount(text) + 1]] as [number, number][],
    };
  });

/** A document that is not a policy mapping at all. */
const wholeDocumentCase: fc.Arbitrary<BadPolicy> = fc
  .constantFrom('', '\n\n', '[]\n', '42\n', '"just text"\n', '- a\n- b\n', '~\n', 'true\n')
  .map((text) => ({
    kind: `not a mapping: ${JSON.stringify(text.trim())}`,
    validText: render(
      baseDoc({ keys: 1, defaults: true, alerts: false, rawFirst: false, padding: 0, suffix: 'x' }),
      0,
    ),
    text,
    code: 'KR_POLICY_INVALID' as const,
    lines: [[1, 1]] as [number, number][],
  }));

/** Every malformed policy the suite generates, weighted towards structural breaks. */
export const badPolicy: fc.Arbitrary<BadPolicy> = fc.oneof(
  { arbitrary: structuralCase, weight: 8 },
  { arbitrary: syntaxCase, weight: 2 },
  { arbitrary: wholeDocumentCase, weight: 1 },
);

/** Files past the 1 MiB cap, built three ways: comment lines, one huge line, a huge labels map. */
export function hugePolicies(): BadPolicy[] {
  const validText = render(
    baseDoc({ keys: 2, defaults: true, alerts: true, rawFirst: false, padding: 0, suffix: 'big' }),
    0,
  );
  const doc = baseDoc({ keys: 2, defaults: true, alerts: true, rawFirst: false, padding: 0, suffix: 'big' });
  const labels = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`label${i}`, 'x'.repeat(20)]));
  (doc.keys as Doc[])[0] = { ...(doc.keys as Doc[])[0], labels };
  const cases = [
    { kind: 'huge: 1.2 MiB of comment lines', text: `${'# filler\n'.repeat(140_000)}${validText}` },
    { kind: 'huge: one 1.1 MiB line', text: `${validText}# ${'x'.repeat(1_150_000)}\n` },
    { kind: 'huge: 40,000 labels', text: render(doc, 0) },
  ];
  return cases.map((c) => ({ ...c, validText, code: 'KR_POLICY_UNREADABLE' as const }));
}
