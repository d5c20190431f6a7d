// The Argo CD health check of a RotatedKey (deploy/argocd/health-rotatedkey.lua, shown in
// docs/crds.md), run in two real Lua VMs with only what Argo CD gives a script (see
// ./argocd-health-vms.ts): fengari (Lua 5.3, in-process) and gopher-lua (Lua 5.1), the VM Argo CD
// itself runs, opened as Argo CD opens it by test/tools/argocd-lua. Each case must give the
// expected health in both. `obj` is the object as Argo CD hands it over, a table built from its
// JSON; the script returns `{status, message}`. scripts/test-argocd-lua.sh builds the Go tool once
// per machine; under CI=true a tool that cannot be built fails the run, elsewhere its cases skip.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fengariHealth, gopherLuaHealth } from './argocd-health-vms.ts';

const SCRIPT = fileURLToPath(new URL('../../deploy/argocd/health-rotatedkey.lua', import.meta.url));
const DOCS = new URL('../../docs/crds.md', import.meta.url);
const BUILD = fileURLToPath(new URL('../../scripts/test-argocd-lua.sh', import.meta.url));

let tool: string | undefined;
let buildError = '';
let scratch = '';
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'keyroll-argocd-lua-'));
  try {
    const { stdout } = await promisify(execFile)('sh', [BUILD], { timeout: 300_000 });
    tool = stdout.trim() || undefined;
  } catch (error) {
    buildError = error instanceof Error ? error.message : String(error);
  }
  if (tool === undefined && process.env.CI === 'true')
    throw new Error(`scripts/test-argocd-lua.sh could not build the Argo CD Lua VM: ${buildError}`);
}, 300_000);
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});
const NO_TOOL =
  'the Argo CD Lua VM is not built: run scripts/test-argocd-lua.sh (needs Go and the module proxy)';

const condition = (
  type: string,
  status: string,
  reason: string,
  message: string,
  observedGeneration = 2,
) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: '2026-11-29T08:00:00Z',
  observedGeneration,
});
const key = (status?: Record<string, unknown>) => ({
  apiVersion: 'keyroll.io/v1alpha1',
  kind: 'RotatedKey',
  metadata: { name: 'billing-api', namespace: 'billing', generation: 2 },
  spec: { id: 'key_billing' },
  ...(status === undefined ? {} : { status }),
});
const READY = condition('Ready', 'True', 'Rotated', 'rotated by the schedule');

const cases: [string, Record<string, unknown>, string, string][] = [
  ['no status yet', key(), 'Progressing', 'Waiting for keyroll to observe the key'],
  [
    'a status for an older generation',
    key({ observedGeneration: 1, conditions: [condition('Ready', 'True', 'Rotated', 'ok', 1)] }),
    'Progressing',
    'Waiting for keyroll to observe generation 2',
  ],
  [
    'Ready=True',
    key({ observedGeneration: 2, conditions: [READY] }),
    'Healthy',
    'Rotated: rotated by the schedule',
  ],
  [
    'Ready=False',
    key({
      observedGeneration: 2,
      conditions: [condition('Ready', 'False', 'RotationFailed', 'the roll failed')],
    }),
    'Degraded',
    'RotationFailed: the roll failed',
  ],
  [
    'refused by tenancy (Ready=False)',
    key({
      observedGeneration: 2,
      conditions: [condition('Ready', 'False', 'OrganizationNotAdmitted', 'no condition admits')],
    }),
    'Degraded',
    'OrganizationNotAdmitted: no condition admits',
  ],
  [
    'Rotating=True, while Ready holds the last result',
    key({ observedGeneration: 2, conditions: [READY, condition('Rotating', 'True', 'Rolling', 'rolling')] }),
    'Progressing',
    'Rolling: rolling',
  ],
  [
    'Rotating=False after a rotation',
    key({ observedGeneration: 2, conditions: [READY, condition('Rotating', 'False', 'Idle', '')] }),
    'Healthy',
    'Rotated: rotated by the schedule',
  ],
  [
    'Quarantined=True',
    key({
      observedGeneration: 2,
      conditions: [
        condition('Ready', 'False', 'RotationFailed', 'failed'),
        condition('Quarantined', 'True', 'Quarantined', 'five failures'),
      ],
    }),
    'Degraded',
    'Quarantined: five failures',
  ],
  [
    'Ready=Unknown',
    key({ observedGeneration: 2, conditions: [condition('Ready', 'Unknown', 'Pending', 'not rotated yet')] }),
    'Progressing',
    'Pending: not rotated yet',
  ],
  [
    'a status without conditions',
    key({ observedGeneration: 2 }),
    'Progressing',
    'Waiting for keyroll to report Ready for generation 2',
  ],
  [
    'a Ready condition of an older generation',
    key({ observedGeneration: 2, conditions: [condition('Ready', 'True', 'Rotated', 'ok', 1)] }),
    'Progressing',
    'Waiting for keyroll to report Ready for generation 2',
  ],
];

// A script that reports what it can reach: what Argo CD opens, and Lua 5.1's tostring of a whole number.
const PROBE = `local ok = pcall(function() return ("x"):upper() end)
return { status = "Healthy", message = table.concat({ type(string), type(math), type(os), type(io),
  type(coroutine), type(table), type(require("os").time), type(require("os").date),
  type(require("os").exit), tostring(ok), tostring(obj.metadata.generation),
  type(actionParams) }, " ") }
`;
const PROBED = 'nil nil nil nil nil table function function nil false 2 table';

describe('the Argo CD health check of a RotatedKey', () => {
  describe('under fengari (Lua 5.3)', () => {
    it.for(cases)('%s', async ([, object, status, message]) => {
      expect(fengariHealth(await readFile(SCRIPT, 'utf8'), object)).toEqual({ status, message });
    });

    it('offers only what Argo CD opens: no string, math or global os library', () => {
      expect(fengariHealth(PROBE, key())).toEqual({ status: 'Healthy', message: PROBED });
    });
  });

  describe('under gopher-lua (Lua 5.1), opened as Argo CD opens it', () => {
    it.for(cases)('%s', async ([, object, status, message], { skip }) => {
      if (tool === undefined) return skip(NO_TOOL);
      expect(await gopherLuaHealth(tool, SCRIPT, object)).toEqual({ status, message });
    });

    it('offers only what Argo CD opens: no string, math or global os library', async ({ skip }) => {
      if (tool === undefined) return skip(NO_TOOL);
      const probe = join(scratch, 'probe.lua');
      await writeFile(probe, PROBE);
      expect(await gopherLuaHealth(tool, probe, key())).toEqual({ status: 'Healthy', message: PROBED });
    });

    // The tool must read a result as Argo CD's ExecuteHealthLua does, or a wrong script could pass.
    it.for<[string, string, string, string]>([
      [
        'a status Argo CD does not know is Unknown',
        'return { status = "Ready" }',
        'Unknown',
        'Lua returned an invalid health status',
      ],
      ['an empty table is no health', 'return {}', '', ''],
      ['nil is no health', 'return nil', '', ''],
    ])('%s', async ([name, source, status, message], { skip }) => {
      if (tool === undefined) return skip(NO_TOOL);
      const script = join(scratch, `${name.replaceAll(' ', '-')}.lua`);
      await writeFile(script, source);
      expect(await gopherLuaHealth(tool, script, key())).toEqual({ status, message });
    });

    it('fails where Argo CD fails: a script error, or a result that is not a table', async ({ skip }) => {
      if (tool === undefined) return skip(NO_TOOL);
      const script = join(scratch, 'fails.lua');
      await writeFile(script, 'return string.format("%d", 1)');
      await expect(gopherLuaHealth(tool, script, key())).rejects.toThrow(
        /non-table object\(nil\) with key 'format'/,
      );
      await writeFile(script, 'return "Healthy"');
      await expect(gopherLuaHealth(tool, script, key())).rejects.toThrow(
        /expect table output from Lua script, not string/,
      );
    });
  });

  it('is the script docs/crds.md shows', async () => {
    const script = await readFile(SCRIPT, 'utf8');
    const docs = await readFile(DOCS, 'utf8');
    const block = /```lua\n([\s\S]*?)```/.exec(docs.slice(docs.indexOf('## Argo CD health')))?.[1];
    expect(block).toBe(script);
  });
});
