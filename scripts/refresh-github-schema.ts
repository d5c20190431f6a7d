// Writes test/fixtures/github/secret-scanning.json (`npm run refresh:github-schema`): the part of
// GitHub's published REST and webhook descriptions that the loopback GitHub of the leak-intake
// tests (test/support/fake-github.ts) validates against. The whole description is a 385 MB package
// the tests would install for a few schemas; the extract is checked in with its source named.
//
//   node scripts/refresh-github-schema.ts [--openapi VERSION] [--webhooks-examples VERSION]
//
// Each package is fetched with `npm pack` into a temporary directory (default: the version the
// extract was last made from; `latest` takes the newest), so nothing is added to node_modules.
// Review the diff like any change of a third party's contract: a schema that moved is a reason
// to check keyroll's GitHub client, not only the fixture.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const TARGET = new URL('../test/fixtures/github/secret-scanning.json', import.meta.url);
const OPENAPI_PACKAGE = '@octokit/openapi';
const OPENAPI_PATH = 'generated/api.github.com.json';
const EXAMPLES_PACKAGE = '@octokit/webhooks-examples';
const EXAMPLES_PATH = 'api.github.com/index.json';

/** The component schemas the fake checks; everything they reference comes along. */
const SCHEMA_ROOTS = [
  'secret-scanning-alert-state',
  'secret-scanning-alert-resolution',
  'secret-scanning-alert-with-metadata',
  'webhook-secret-scanning-alert-created',
  'webhook-secret-scanning-alert-reopened',
  'webhook-secret-scanning-alert-publicly-leaked',
  'webhook-secret-scanning-alert-validated',
  'webhook-secret-scanning-alert-resolved',
];
/** The REST example an alert answer and a webhook's `alert` are built from. */
const EXAMPLE_NAMES = ['secret-scanning-alert-open'];
/** The webhook example whose `repository` and `sender` a secret_scanning_alert payload borrows (the examples have no secret_scanning_alert). */
const WEBHOOK_EXAMPLE = 'code_scanning_alert';

interface OpenApi {
  components: { schemas: Record<string, unknown>; examples: Record<string, unknown> };
}

interface WebhookDefinition {
  name: string;
  examples: Record<string, unknown>[];
}

interface Extract {
  source: Record<string, { package: string; version: string; path: string }>;
}

/** Unpacks one file of `name@version` (from the npm registry) and returns its text and the version npm resolved. */
function packedFile(
  dir: string,
  name: string,
  version: string,
  path: string,
): { text: string; version: string } {
  const packed = JSON.parse(
    execFileSync('npm', ['pack', `${name}@${version}`, '--json', '--silent', '--pack-destination', dir], {
      encoding: 'utf8',
    }),
  ) as { filename: string; version: string }[];
  const tarball = packed[0];
  if (tarball === undefined) throw new Error(`npm pack ${name}@${version} packed nothing`);
  execFileSync('tar', ['xzf', join(dir, tarball.filename), '-C', dir, `package/${path}`]);
  const text = readFileSync(join(dir, 'package', path), 'utf8');
  rmSync(join(dir, 'package'), { recursive: true, force: true });
  return { text, version: tarball.version };
}

/** Every component schema `roots` reach through `#/components/schemas/…` references. */
function schemaClosure(schemas: Record<string, unknown>, roots: readonly string[]): Record<string, unknown> {
  const taken = new Map<string, unknown>();
  const pending = [...roots];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (taken.has(name)) continue;
    const schema = schemas[name];
    if (schema === undefined) throw new Error(`${OPENAPI_PACKAGE} has no component schema ${name}`);
    taken.set(name, schema);
    for (const match of JSON.stringify(schema).matchAll(/"#\/components\/schemas\/([^"]+)"/g))
      pending.push(match[1]!);
  }
  return Object.fromEntries([...taken].sort(([a], [b]) => a.localeCompare(b)));
}

const previous = existsSync(TARGET) ? (JSON.parse(readFileSync(TARGET, 'utf8')) as Extract).source : {};
const { values } = parseArgs({
  options: {
    openapi: { type: 'string', default: previous.openapi?.version ?? 'latest' },
    'webhooks-examples': { type: 'string', default: previous.webhooksExamples?.version ?? 'latest' },
  },
});

const dir = mkdtempSync(join(tmpdir(), 'keyroll-github-schema-'));
try {
  const openapi = packedFile(dir, OPENAPI_PACKAGE, values.openapi, OPENAPI_PATH);
  const examples = packedFile(dir, EXAMPLES_PACKAGE, values['webhooks-examples'], EXAMPLES_PATH);
  const description = JSON.parse(openapi.text) as OpenApi;
  const definitions = JSON.parse(examples.text) as WebhookDefinition[];
  const webhookExample = definitions.find((definition) => definition.name === WEBHOOK_EXAMPLE)?.examples[0];
  if (webhookExample === undefined) throw new Error(`${EXAMPLES_PACKAGE} has no ${WEBHOOK_EXAMPLE} example`);
  const extract = {
    about:
      'A generated extract for the loopback GitHub of the tests; refresh with `npm run refresh:github-schema` (scripts/refresh-github-schema.ts), never edit by hand.',
    source: {
      openapi: { package: OPENAPI_PACKAGE, version: openapi.version, path: OPENAPI_PATH },
      webhooksExamples: { package: EXAMPLES_PACKAGE, version: examples.version, path: EXAMPLES_PATH },
    },
    components: {
      schemas: schemaClosure(description.components.schemas, SCHEMA_ROOTS),
      examples: Object.fromEntries(
        EXAMPLE_NAMES.map((name) => {
          const example = description.components.examples[name];
          if (example === undefined) throw new Error(`${OPENAPI_PACKAGE} has no component example ${name}`);
          return [name, example];
        }),
      ),
    },
    webhookExamples: {
      [WEBHOOK_EXAMPLE]: { repository: webhookExample.repository, sender: webhookExample.sender },
    },
  };
  writeFileSync(TARGET, `${JSON.stringify(extract, null, 2)}\n`);
  console.log(
    `wrote ${TARGET.pathname} from ${OPENAPI_PACKAGE}@${openapi.version} and ${EXAMPLES_PACKAGE}@${examples.version}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
