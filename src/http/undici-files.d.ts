// Declarations for the undici files src/http/undici.ts loads directly: undici publishes types
// for its index only. Each file's module.exports is the same object the index re-exports.
declare module 'undici/lib/dispatcher/agent.js' {
  const Agent: typeof import('undici').Agent;
  export default Agent;
}
declare module 'undici/lib/dispatcher/dispatcher.js' {
  const Dispatcher: typeof import('undici').Dispatcher;
  export default Dispatcher;
}
declare module 'undici/lib/api/index.js' {
  const api: Pick<typeof import('undici'), 'request' | 'stream' | 'pipeline' | 'upgrade' | 'connect'>;
  export default api;
}
declare module 'undici/lib/global.js' {
  const global: Pick<typeof import('undici'), 'getGlobalDispatcher' | 'setGlobalDispatcher'>;
  export default global;
}
declare module 'undici/lib/core/util.js' {
  const util: {
    /** An http: or https: URL from a string or URL; InvalidArgumentError for anything else. */
    parseURL(url: string | URL): URL;
  };
  export default util;
}
