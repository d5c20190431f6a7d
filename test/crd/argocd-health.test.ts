// The Argo CD health check of a RotatedKey (deploy/argocd/health-rotatedkey.lua, shown in
// docs/crds.md), run in a real Lua VM: fengari (Lua 5.3 in JavaScript; Argo CD runs gopher-lua,
// Lua 5.1, and the script keeps to what both read alike). `obj` is the object as Argo CD hands it
// over, a table built from its JSON; the script returns `{status, message}`.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

const SCRIPT = new URL('../../deploy/argocd/health-rotatedkey.lua', import.meta.url);
const DOCS = new URL('../../docs/crds.md', import.meta.url);

type LuaState = object;
/** The part of fengari's C-like API the test uses (fengari ships no types). */
interface Fengari {
  lua: {
    LUA_OK: number;
    lua_newtable(L: LuaState): void;
    lua_pushstring(L: LuaState, value: Uint8Array): void;
    lua_pushinteger(L: LuaState, value: number): void;
    lua_pushnumber(L: LuaState, value: number): void;
    lua_pushboolean(L: LuaState, value: boolean): void;
    lua_pushnil(L: LuaState): void;
    lua_setfield(L: LuaState, index: number, key: Uint8Array): void;
    lua_rawseti(L: LuaState, index: number, n: number): void;
    lua_setglobal(L: LuaState, name: Uint8Array): void;
    lua_pcall(L: LuaState, nargs: number, nresults: number, handler: number): number;
    lua_getfield(L: LuaState, index: number, key: Uint8Array): number;
    lua_tojsstring(L: LuaState, index: number): string | null;
    lua_pop(L: LuaState, n: number): void;
  };
  lauxlib: {
    luaL_newstate(): LuaState;
    luaL_loadstring(L: LuaState, source: Uint8Array): number;
  };
  lualib: { luaL_openlibs(L: LuaState): void };
  to_luastring: (value: string) => Uint8Array;
}

const fengari = createRequire(import.meta.url)('fengari') as Fengari;
const { lua, lauxlib, lualib, to_luastring } = fengari;

/** Pushes a JSON value as Argo CD's JSON → Lua conversion does: objects and arrays become tables. */
function push(L: LuaState, value: unknown): void {
  if (value === null || value === undefined) {
    lua.lua_pushnil(L);
  } else if (typeof value === 'string') {
    lua.lua_pushstring(L, to_luastring(value));
  } else if (typeof value === 'number') {
    // An integer stays one, so tostring() prints "2" as Argo CD's Lua does, not Lua 5.3's "2.0".
    if (Number.isInteger(value)) lua.lua_pushinteger(L, value);
    else lua.lua_pushnumber(L, value);
  } else if (typeof value === 'boolean') {
    lua.lua_pushboolean(L, value);
  } else if (Array.isArray(value)) {
    lua.lua_newtable(L);
    for (const [at, item] of (value as unknown[]).entries()) {
      push(L, item);
      lua.lua_rawseti(L, -2, at + 1);
    }
  } else {
    lua.lua_newtable(L);
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      push(L, item);
      lua.lua_setfield(L, -2, to_luastring(key));
    }
  }
}

async function health(object: Record<string, unknown>): Promise<{ status: string; message: string }> {
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  push(L, object);
  lua.lua_setglobal(L, to_luastring('obj'));
  const loaded = lauxlib.luaL_loadstring(L, to_luastring(await readFile(SCRIPT, 'utf8')));
  if (loaded !== lua.LUA_OK) throw new Error(`the script does not load: ${lua.lua_tojsstring(L, -1) ?? ''}`);
  if (lua.lua_pcall(L, 0, 1, 0) !== lua.LUA_OK)
    throw new Error(`the script failed: ${lua.lua_tojsstring(L, -1) ?? ''}`);
  const field = (name: string): string => {
    lua.lua_getfield(L, -1, to_luastring(name));
    const value = lua.lua_tojsstring(L, -1) ?? '';
    lua.lua_pop(L, 1);
    return value;
  };
  return { status: field('status'), message: field('message') };
}

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

describe('the Argo CD health check of a RotatedKey', () => {
  it.each(cases)('%s', async (_, object, status, message) => {
    expect(await health(object)).toEqual({ status, message });
  });

  it('is the script docs/crds.md shows', async () => {
    const script = await readFile(SCRIPT, 'utf8');
    const docs = await readFile(DOCS, 'utf8');
    const block = /```lua\n([\s\S]*?)```/.exec(docs.slice(docs.indexOf('## Argo CD health')))?.[1];
    expect(block).toBe(script);
  });
});
