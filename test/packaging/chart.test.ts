// Fast, static checks of the Helm chart that need no helm binary. Rendering, linting and
// validating the manifests against the Kubernetes schemas is `npm run check:chart`
// (scripts/check-chart.sh), which CI runs; it builds helm once, which takes minutes.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { execForm, parseDockerfile } from '../../scripts/lib/dockerfile.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = `${root}helm/keyroll/`;
const values = parse(readFileSync(`${chart}values.yaml`, 'utf8')) as Record<string, unknown>;
const schema = JSON.parse(readFileSync(`${chart}values.schema.json`, 'utf8')) as JsonSchema;

interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  definitions?: Record<string, JsonSchema>;
}

function resolve(node: JsonSchema): JsonSchema {
  if (node.$ref === undefined) return node;
  const name = node.$ref.replace('#/definitions/', '');
  const target = schema.definitions?.[name];
  if (target === undefined) throw new Error(`unresolved ${node.$ref}`);
  return resolve(target);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Paths of values.yaml that the schema does not describe. */
function undescribedValues(value: unknown, node: JsonSchema, path: string): string[] {
  const here = resolve(node);
  if (isPlainObject(value)) {
    // A Kubernetes object passed through as written: the Kubernetes schema checks it on render.
    if (here.properties === undefined && here.additionalProperties === undefined) return [];
    return Object.entries(value).flatMap(([key, child]) => {
      const sub =
        here.properties?.[key] ??
        (typeof here.additionalProperties === 'object' ? here.additionalProperties : undefined);
      return sub === undefined ? [`${path}.${key}`] : undescribedValues(child, sub, `${path}.${key}`);
    });
  }
  if (Array.isArray(value) && here.items !== undefined) {
    return value.flatMap((item, index) => undescribedValues(item, here.items!, `${path}[${index}]`));
  }
  return [];
}

/** Paths the schema describes that values.yaml gives no default (so no documentation) for. */
function undocumentedProperties(value: unknown, node: JsonSchema, path: string): string[] {
  const here = resolve(node);
  if (here.properties === undefined) return [];
  return Object.entries(here.properties).flatMap(([key, sub]) => {
    if (path === '' && key === 'global') return [];
    if (!isPlainObject(value) || !(key in value)) return [`${path}.${key}`];
    return undocumentedProperties(value[key], sub, `${path}.${key}`);
  });
}

function secretLookingLiterals(value: unknown, path: string): string[] {
  if (isPlainObject(value))
    return Object.entries(value).flatMap(([key, child]) => secretLookingLiterals(child, `${path}.${key}`));
  if (Array.isArray(value))
    return value.flatMap((item, index) => secretLookingLiterals(item, `${path}[${index}]`));
  const leaf = path.split('.').at(-1) ?? '';
  const secretish =
    /(password|token|secret|apikey|routingkey|webhookurl)$/i.test(leaf) && !/^existingSecret$/.test(leaf);
  const isReference = typeof value === 'string' && /^(env:|file:\/)/.test(value);
  return secretish && typeof value === 'string' && value !== '' && !isReference ? [path] : [];
}

describe('values.schema.json', () => {
  it('describes every value values.yaml sets (unknown keys are rejected, so an undescribed one would break installs)', () => {
    expect(undescribedValues(values, schema, '')).toEqual([]);
  });

  it('describes nothing that values.yaml leaves undocumented', () => {
    expect(undocumentedProperties(values, schema, '')).toEqual([]);
  });

  it("rejects unknown keys at the top level and in every section of the chart's own", () => {
    expect(schema.additionalProperties).toBe(false);
    for (const [key, node] of Object.entries(schema.properties ?? {})) {
      const section = resolve(node);
      if (section.properties !== undefined) expect(section.additionalProperties, key).toBe(false);
    }
  });
});

describe('values.yaml', () => {
  it('holds no secret values, only Secret names and references', () => {
    expect(secretLookingLiterals(values, '')).toEqual([]);
    for (const file of readdirSync(`${chart}ci`)) {
      expect(secretLookingLiterals(parse(readFileSync(`${chart}ci/${file}`, 'utf8')), file), file).toEqual(
        [],
      );
    }
  });

  it('runs the pod as the user and group the Dockerfile sets', () => {
    const dockerfile = parseDockerfile(readFileSync(`${root}Dockerfile`, 'utf8'));
    const user = dockerfile.stages
      .at(-1)!
      .instructions.filter((instruction) => instruction.keyword === 'USER')
      .at(-1)!.args;
    const context = values.podSecurityContext as { runAsUser: number; runAsGroup: number };
    expect(`${context.runAsUser}:${context.runAsGroup}`).toBe(user);
  });

  it('keeps the Pod Security Standard "restricted" settings by default', () => {
    expect(values.podSecurityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(values.containerSecurityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect((values.serviceAccount as { automountToken: boolean }).automountToken).toBe(false);
  });
});

describe('network exposure', () => {
  const template = (name: string): string => readFileSync(`${chart}templates/${name}`, 'utf8');

  it('renders a NetworkPolicy by default, admitting nobody to the daemon until daemonIngressFrom names peers', () => {
    const policy = values.networkPolicy as {
      enabled: boolean;
      restrictEgress: boolean;
      daemonIngressFrom: unknown[];
    };
    expect(policy.enabled).toBe(true);
    expect(policy.daemonIngressFrom).toEqual([]);
    // The whole template hangs on that one value: on by default means rendered by default.
    expect(template('networkpolicy.yaml')).toMatch(/^{{- if \.Values\.networkPolicy\.enabled }}\n/);
    expect(template('networkpolicy.yaml')).toMatch(/ingress:\n(.*\n)*?\s+{{- else }} \[\]/);
  });

  it('sets 0.0.0.0 for the daemon pod explicitly (keyroll itself defaults to loopback)', () => {
    expect(template('deployment.yaml')).toContain('"--listen" (printf "0.0.0.0:%d" (int $d.port))');
  });

  it('gives the daemon one trigger key per caller and a state directory for the replay record', () => {
    const daemon = values.daemon as Record<string, unknown>;
    expect(daemon.triggerKeys).toEqual({});
    expect(daemon).not.toHaveProperty('triggerSecret');
    expect(template('deployment.yaml')).toContain('"--trigger-key"');
    expect(template('deployment.yaml')).toContain('"--state-dir"');
  });
});

describe('templates', () => {
  it("mount the policy where the image's default command reads it", () => {
    const helpers = readFileSync(`${chart}templates/_helpers.tpl`, 'utf8');
    const mounted = /define "keyroll\.policyPath" -}}([^{]+){{/.exec(helpers)?.[1];
    const dockerfile = parseDockerfile(readFileSync(`${root}Dockerfile`, 'utf8'));
    const cmd = execForm(
      dockerfile.stages
        .at(-1)!
        .instructions.filter((instruction) => instruction.keyword === 'CMD')
        .at(-1)!,
    );
    expect(cmd?.[cmd.indexOf('--policy') + 1]).toBe(mounted);
  });

  it('never render a Secret (credentials come from existing Secrets)', () => {
    for (const file of readdirSync(`${chart}templates`, { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.yaml')) continue;
      expect(readFileSync(`${chart}templates/${file}`, 'utf8'), file).not.toMatch(/^kind:\s*Secret\s*$/m);
    }
  });
});

describe('chart check inputs', () => {
  it('name the stage and the error of every must-fail values file', () => {
    const dir = `${root}helm/tests/must-fail/`;
    const files = readdirSync(dir).filter((file) => file.endsWith('-values.yaml'));
    const stages = files.map(
      (file) => /^# expect-stage: (\S+)$/m.exec(readFileSync(`${dir}${file}`, 'utf8'))?.[1],
    );
    expect(new Set(stages)).toEqual(new Set(['values', 'manifest']));
    for (const file of files)
      expect(readFileSync(`${dir}${file}`, 'utf8'), file).toMatch(/^# expect-error: \S/m);
  });

  it('cover defaults, AWS with IRSA, Vault with kubernetes auth, daemon, sharded and the leak Job', () => {
    const files = readdirSync(`${chart}ci`);
    expect(files).toEqual(
      expect.arrayContaining([
        'defaults-values.yaml',
        'aws-irsa-values.yaml',
        'vault-kubernetes-values.yaml',
        'daemon-values.yaml',
        'sharded-values.yaml',
        'rotate-values.yaml',
      ]),
    );
  });

  it('are wired to npm run check:chart', () => {
    const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts['check:chart']).toBe('sh scripts/check-chart.sh');
  });
});
