// YAML-level problems, before any schema check: parse errors, unknown tags, aliases without an
// anchor, and keys written twice in one mapping (the second would silently win otherwise, so
// `schedule` written twice could rotate a key on the wrong cadence).
import {
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  visit,
  type Document,
  type LineCounter,
  type YAMLError,
} from 'yaml';
import type { PolicyIssue } from './errors.ts';
import type { DocPath } from './issue-text.ts';
import { formatPath } from './locate.ts';

export function syntaxIssues(doc: Document, file: string, lineCounter: LineCounter): PolicyIssue[] {
  const at = (offset: number, path: DocPath, message: string): PolicyIssue => {
    const { line, col } = lineCounter.linePos(offset);
    return { file, line, column: col, path: formatPath(path), message };
  };
  const duplicates = duplicateKeys(doc.contents, []);
  const issues: PolicyIssue[] = duplicates.map((duplicate) =>
    at(duplicate.offset, duplicate.path, 'is written twice in the same mapping (YAML keys must be unique)'),
  );
  for (const error of [...doc.errors, ...doc.warnings]) {
    // Reported above with their path; yaml's own report of them carries no name.
    if (error.code === 'DUPLICATE_KEY' && duplicates.length > 0) continue;
    issues.push(at(error.pos[0], [], yamlSentence(error)));
  }
  visit(doc, {
    Alias(_, node) {
      if (node.resolve(doc) === undefined)
        issues.push(
          at(node.range?.[0] ?? 0, [], `alias *${node.source} refers to no anchor defined before it`),
        );
    },
  });
  return issues;
}

interface Duplicate {
  path: DocPath;
  offset: number;
}

function duplicateKeys(node: unknown, path: DocPath): Duplicate[] {
  const found: Duplicate[] = [];
  if (isMap(node)) {
    const seen = new Set<string>();
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const name = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      if (seen.has(name))
        found.push({
          path: [...path, name],
          offset: pair.key !== null && isScalar(pair.key) ? (pair.key.range?.[0] ?? 0) : 0,
        });
      seen.add(name);
      if (!isAlias(pair.value)) found.push(...duplicateKeys(pair.value, [...path, name]));
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, index) => {
      found.push(...duplicateKeys(item, [...path, index]));
    });
  }
  return found;
}

// The yaml package's messages are terse and a few quote source text; the common codes get a
// plain sentence, the rest keep the package's wording (which quotes no values).
function yamlSentence(error: YAMLError): string {
  switch (error.code) {
    case 'DUPLICATE_KEY':
      return 'a field is written twice in the same mapping (YAML keys must be unique)';
    case 'MULTIPLE_DOCS':
      return 'the file holds more than one YAML document (a second ---); a policy is a single document';
    case 'BAD_DQ_ESCAPE':
      return 'invalid escape sequence in a double-quoted string';
    case 'TAB_AS_INDENT':
      return 'a tab is used for indentation; YAML indentation must use spaces';
    case 'TAG_RESOLVE_FAILED':
      return 'unknown YAML tag; a policy uses plain YAML without !tags';
    default:
      if (error.message.startsWith('Unresolved tag'))
        return 'unknown YAML tag; a policy uses plain YAML without !tags';
      return `invalid YAML: ${error.message.charAt(0).toLowerCase()}${error.message.slice(1)}`;
  }
}
