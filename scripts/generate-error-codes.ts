// Writes docs/error-codes.md from the catalogue, src/error-codes.ts (`npm run --silent docs:error-codes`).
// test/error-codes.test.ts fails when the page is stale.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES_PAGE, errorCodesPage } from './error-codes-page.ts';

await writeFile(fileURLToPath(new URL(`../${ERROR_CODES_PAGE}`, import.meta.url)), errorCodesPage());
console.log(`wrote ${ERROR_CODES_PAGE}`);
