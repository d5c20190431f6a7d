// Maps a path in the policy (`keys[2].schedule`) to the line the operator has to edit. The yaml
// package keeps source ranges on every node; JSON input goes through the same parser (JSON is
// YAML), so both formats get line numbers.
import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
import type { DocPath } from './issue-text.ts';

export interface SourcePosition {
  line: number;
  column: number;
}

/**
 * Where `path` is written. A field is located at its key (the line that names it, even when its
 * value is a block below); a missing field at the closest ancestor that exists, so "is required"
 * points at the mapping that lacks it.
 */
export function positionOf(doc: Document, lineCounter: LineCounter, path: DocPath): SourcePosition {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const segment of path) {
    // Positions inside an aliased node point at its anchor, far from where the user wrote
    // the alias; the alias itself is the better place to send them.
    if (isAlias(node)) break;
    if (isMap(node)) {
      const pair = node.items.find(
        (item) => (isScalar(item.key) ? String(item.key.value) : String(item.key)) === String(segment),
      );
      if (pair === undefined) break;
      offset = rangeStart(pair.key) ?? rangeStart(pair.value) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item: unknown = node.items[segment];
      if (item === undefined) break;
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      break;
    }
  }
  const { line, col } = lineCounter.linePos(offset);
  return { line, column: col };
}

/** `keys[2].destinations[1].backend`; names that are not identifiers are quoted: `labels["a b"]`. */
export function formatPath(path: DocPath): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text;
}

function rangeStart(node: unknown): number | undefined {
  if (node === null || typeof node !== 'object' || !('range' in node)) return undefined;
  const range = (node as { range?: readonly number[] | null }).range;
  return range?.[0] ?? undefined;
}
