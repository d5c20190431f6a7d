// The parts of undici keyroll uses (Agent, request, the global dispatcher), loaded from undici's
// own files instead of its index. The index is one CommonJS module that requires all of undici on
// load: fetch, WebSocket, EventSource, the cache API, the mock agents, HTTP/2, the SQLite cache
// store, and the Node built-ins they pull in (stream/web, zlib, http2, dns, worker_threads). A
// bundler cannot drop any of it, so every `keyroll rotate` paid for it before its first roll:
// 1.33 MB of the 2.9 MB of JavaScript it loaded (docs/benchmarks.md has the before and after).
//
// What this module must keep equal to undici's index, and test/http/undici.test.ts checks:
// - Dispatcher.prototype carries the API methods (`agent.request(…)`), which the index adds with
//   the same Object.assign; adding them twice (the tests also load the index, for MockAgent) is
//   harmless, the functions are the same.
// - `request(url, options)` checks the URL with undici's parseURL, turns it into origin + path
//   and falls back to the global dispatcher, as the index's `makeDispatcher` does.
// Types come from undici's published declarations: the files below have none of their own.
import type * as Undici from 'undici';
import AgentImpl from 'undici/lib/dispatcher/agent.js';
import DispatcherImpl from 'undici/lib/dispatcher/dispatcher.js';
import api from 'undici/lib/api/index.js';
import util from 'undici/lib/core/util.js';
import globalDispatcher from 'undici/lib/global.js';

Object.assign(DispatcherImpl.prototype, api);

export const Agent = AgentImpl;
export type Agent = Undici.Agent;
export const getGlobalDispatcher: typeof Undici.getGlobalDispatcher = globalDispatcher.getGlobalDispatcher;

type RequestOptions = { dispatcher?: Undici.Dispatcher } & Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> &
  Partial<Pick<Undici.Dispatcher.RequestOptions, 'method'>>;

/**
 * undici's `request(url, options)`, as its index builds it (`makeDispatcher`): the URL checked by
 * undici's own parseURL (an http: or https: URL, else InvalidArgumentError), then undici's request
 * API on `options.dispatcher`, or on the global dispatcher.
 */
export function request(url: string | URL, options: RequestOptions = {}): Promise<Undici.Dispatcher.ResponseData> {
  const parsed = util.parseURL(url);
  const { dispatcher = getGlobalDispatcher(), method, ...rest } = options;
  return api.request.call(dispatcher, {
    ...rest,
    origin: parsed.origin,
    path: parsed.search ? `${parsed.pathname}${parsed.search}` : parsed.pathname,
    method: method ?? (rest.body ? 'PUT' : 'GET'),
  }) as Promise<Undici.Dispatcher.ResponseData>;
}
