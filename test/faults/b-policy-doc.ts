// The valid policies the bad-policy cases start from, and the small tools to break them and to
// find where in the YAML text a field landed: a generated shape (1–4 keys, with or without
// defaults, labels, a raw value, alerts, and sometimes 20,000 comment lines in front) rendered as
// block YAML, plus path get/set/delete and the lines of an entry as the YAML parser sees them.
import fc from 'fast-check';
import { LineCounter, isMap, isScalar, isSeq, parseDocument, stringify } from 'yaml';

/** The emulator's address goes here when the file is written (one line, so lines do not move). */
export const BASE_URL_PLACEHOLDER = 'https://base-url.invalid';
export const ALERT_URL_PLACEHOLDER = 'https://alert-url.invalid/alerts';

export type Path = readonly (string | number)[];
export type Doc = Record<string, unknown>;

export interface BaseShape {
  keys: number;
  defaults: boolean;
  alerts: boolean;
  rawFirst: boolean;
  padding: number;
  suffix: string;
}

export const baseShape: fc.Arbitrary<BaseShape> = fc.record({
  keys: fc.integer({ min: 1, max: 4 }),
  defaults: fc.boolean(),
  alerts: fc.boolean(),
  rawFirst: fc.boolean(),
  // Mostly small files; now and then the policy sits under 20,000 comment lines (~600 KB).
  padding: fc.constantFrom(0, 0, 0, 3, 20_000),
  suffix: fc.stringMatching(/^[a-z0-9]{1,6}$/),
});

export function baseDoc(shape: BaseShape): Doc {
  const keys = Array.from({ length: shape.keys }, (_, i) => ({
    id: `key_${i}_${shape.suffix}`,
    organization: 'org_demo_acme',
    destinations: [
      {
        backend: 'files',
        path: `k${i}.json`,
        ...(i === 0 && shape.rawFirst ? { shape: { format: 'raw' } } : {}),
      },
    ],
    ...(shape.defaults ? {} : { maxAge: '30d' }),
    labels: { team: `t${i}` },
  }));
  return {
    version: 1,
    api: {
      baseUrl: BASE_URL_PLACEHOLDER,
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      timeouts: { headersMs: 10_000, bodyMs: 10_000 },
    },
    backends: { files: { kind: 'file', directory: './secrets' } },
    ...(shape.alerts ? { alerts: { sinks: { hook: { kind: 'webhook', url: ALERT_URL_PLACEHOLDER } } } } : {}),
    ...(shape.defaults
      ? {
          defaults: {
            schedule: '0 3 * * 1',
            timezone: 'UTC',
            minInterval: '1h',
            verify: { readBack: true },
            store: { attempts: 5 },
          },
        }
      : {}),
    keys,
  };
}

export function render(doc: Doc, padding: number): string {
  const body = stringify(doc, { lineWidth: 0 });
  return padding === 0 ? body : `${'# padding comment line to make the file large\n'.repeat(padding)}${body}`;
}

export function clone(doc: Doc): Doc {
  return structuredClone(doc);
}

export function getAt(doc: Doc, path: Path): unknown {
  let node: unknown = doc;
  for (const segment of path) node = (node as Record<string | number, unknown>)[segment];
  return node;
}

export function setAt(doc: Doc, path: Path, value: unknown): void {
  const parent = getAt(doc, path.slice(0, -1)) as Record<string | number, unknown>;
  parent[path.at(-1) as string | number] = value;
}

export function deleteAt(doc: Doc, path: Path): void {
  const parent = getAt(doc, path.slice(0, -1)) as Record<string | number, unknown>;
  Reflect.deleteProperty(parent, path.at(-1) as string | number);
}

/** Lines [from, to] of the entry at `path` (key through value), as the YAML parser sees them. */
export function linesOf(text: string, path: Path): [number, number] | undefined {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  let node: unknown = doc.contents;
  let range: [number, number] = [0, text.length];
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && item.key.value === segment);
      if (!pair || !isScalar(pair.key) || !pair.key.range) return undefined;
      const value = pair.value as { range?: [number, number, number] } | null;
      range = [pair.key.range[0], value?.range?.[1] ?? pair.key.range[1]];
      node = pair.value;
    } else if (isSeq(node)) {
      const item = node.items[segment as number] as { range?: [number, number, number] } | undefined;
      if (!item?.range) return undefined;
      range = [item.range[0], item.range[1]];
      node = item;
    } else {
      return undefined;
    }
  }
  return [lineCounter.linePos(range[0]).line, lineCounter.linePos(Math.max(range[0], range[1] - 1)).line];
}

export function lineCount(text: string): number {
  return text.split('\n').length;
}
