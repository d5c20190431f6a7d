import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { AUDIT_EVENTS } from '../../src/audit/events.ts';
import { AUDIT_EVENT_LEVELS } from '../../src/audit/levels.ts';
import { AUDIT_REDACT_PATHS } from '../../src/audit/logger.ts';

const docs = await readFile(new URL('../../docs/audit-events.md', import.meta.url), 'utf8');

// Catalogue rows look like: | `key.rolled` | info | fields | meaning |
const rows = [...docs.matchAll(/^\| `([a-z_.-]+)` \| (debug|info|warn|error) \| .* \| (.*) \|$/gm)].map(
  (m) => ({ name: m[1]!, level: m[2]!, meaning: m[3]! }),
);

describe('docs/audit-events.md', () => {
  it('documents every catalogue event, and no event outside it', () => {
    expect(rows.map((r) => r.name).sort()).toEqual(Object.keys(AUDIT_EVENTS).sort());
  });

  it('gives each event the level keyroll writes it at', () => {
    for (const row of rows)
      expect(row.level, row.name).toBe(AUDIT_EVENT_LEVELS[row.name as keyof typeof AUDIT_EVENT_LEVELS]);
  });

  it("states each event's meaning as the catalogue does", () => {
    for (const row of rows)
      expect(row.meaning, row.name).toBe(AUDIT_EVENTS[row.name as keyof typeof AUDIT_EVENTS]);
  });

  it('documents every redact path', () => {
    for (const path of AUDIT_REDACT_PATHS) expect(docs, path).toContain(`\`${path}\``);
  });
});
