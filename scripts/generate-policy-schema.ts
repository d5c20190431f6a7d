// Writes config/policy.schema.json from the zod policy schema (`npm run schema:policy`).
// test/policy/json-schema.test.ts fails when the committed file differs from this output.
import { writeFile } from 'node:fs/promises';
import { policyJsonSchemaText } from '../src/policy/json-schema.ts';

const target = new URL('../config/policy.schema.json', import.meta.url);
await writeFile(target, policyJsonSchemaText());
console.log(`wrote ${target.pathname}`);
