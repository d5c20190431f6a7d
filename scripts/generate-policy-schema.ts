// Writes config/policy.schema.json and config/daemon-settings.schema.json (the policy file of
// `keyroll daemon --keys-from kubernetes`) from the zod schemas (`npm run schema:policy`).
// test/policy/json-schema.test.ts fails when a committed file differs from this output.
import { writeFile } from 'node:fs/promises';
import { policyJsonSchemaText, settingsJsonSchemaText } from '../src/policy/json-schema.ts';

for (const [name, text] of [
  ['policy.schema.json', policyJsonSchemaText()],
  ['daemon-settings.schema.json', settingsJsonSchemaText()],
] as const) {
  const target = new URL(`../config/${name}`, import.meta.url);
  await writeFile(target, text);
  console.log(`wrote ${target.pathname}`);
}
