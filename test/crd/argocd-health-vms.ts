// The two Lua VMs test/crd/argocd-health.test.ts runs an Argo CD health script in, each with only
// what Argo CD gives a script set in argocd-cm (argoproj/argo-cd util/lua/lua.go): the libraries
// package, base and table; os.time and os.date behind `require("os")` only (Argo CD's "safe os"
// sets no global); no string, math, io, coroutine or debug library; `obj` the object's JSON as
// tables; `actionParams` an empty table.
//   - fengari: Lua 5.3 in JavaScript, in-process, always there.
//   - gopher-lua (Lua 5.1), the VM Argo CD runs, through test/tools/argocd-lua (built by
//     scripts/test-argocd-lua.sh), which opens it as Argo CD does.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';

/** What Argo CD records for the resource; an empty field is ''. */
export interface Health {
  status: string;
  message: string;
}

type LuaState = object;
type LuaCFunction = (L: LuaState) => number;
/** The part of fengari's C-like API used here (fengari ships no types). */
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
    luaL_requiref(L: LuaState, name: Uint8Array, open: LuaCFunction, global: number): void;
  };
  lualib: {
    luaopen_package: LuaCFunction;
    luaopen_base: LuaCFunction;
    luaopen_table: LuaCFunction;
    luaopen_os: LuaCFunction;
  };
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
    // An integer stays one, so tostring() prints "2" as gopher-lua does, not Lua 5.3's "2.0".
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

// Argo CD's safe os registers nothing global; `require("os")` loads a module of time and date.
const SAFE_OS = `
local full = package.loaded.os
package.loaded.os = nil
package.preload.os = function() return { time = full.time, date = full.date } end
`;

function run(L: LuaState, source: string, results: number, what: string): void {
  if (lauxlib.luaL_loadstring(L, to_luastring(source)) !== lua.LUA_OK)
    throw new Error(`${what} does not load: ${lua.lua_tojsstring(L, -1) ?? ''}`);
  if (lua.lua_pcall(L, 0, results, 0) !== lua.LUA_OK)
    throw new Error(`${what} failed: ${lua.lua_tojsstring(L, -1) ?? ''}`);
}

/** A fengari state with what Argo CD opens for a script without useOpenLibs, in Argo CD's order. */
function argoState(): LuaState {
  const L = lauxlib.luaL_newstate();
  const libs: [string, LuaCFunction][] = [
    ['package', lualib.luaopen_package],
    ['_G', lualib.luaopen_base],
    ['table', lualib.luaopen_table],
  ];
  for (const [name, open] of libs) {
    lauxlib.luaL_requiref(L, to_luastring(name), open, 1);
    lua.lua_pop(L, 1);
  }
  lauxlib.luaL_requiref(L, to_luastring('os'), lualib.luaopen_os, 0);
  lua.lua_pop(L, 1);
  run(L, SAFE_OS, 0, 'the safe os prelude');
  lua.lua_newtable(L);
  lua.lua_setglobal(L, to_luastring('actionParams'));
  return L;
}

/** Runs a health script under fengari and reads the returned table's status and message. */
export function fengariHealth(script: string, object: Record<string, unknown>): Health {
  const L = argoState();
  push(L, object);
  lua.lua_setglobal(L, to_luastring('obj'));
  run(L, script, 1, 'the script');
  const field = (name: string): string => {
    lua.lua_getfield(L, -1, to_luastring(name));
    const value = lua.lua_tojsstring(L, -1) ?? '';
    lua.lua_pop(L, 1);
    return value;
  };
  return { status: field('status'), message: field('message') };
}

const execFileAsync = promisify(execFile);

/** Runs the health script at `scriptPath` under gopher-lua through the argocd-lua tool at `tool`. */
export async function gopherLuaHealth(
  tool: string,
  scriptPath: string,
  object: Record<string, unknown>,
): Promise<Health> {
  const running = execFileAsync(tool, [scriptPath], { timeout: 30_000 });
  running.child.stdin?.end(JSON.stringify(object));
  const { stdout } = await running;
  const recorded = JSON.parse(stdout) as Partial<Health>;
  return { status: recorded.status ?? '', message: recorded.message ?? '' };
}
