// What a use*() helper returns for a value its hooks make anew for each test or block (a bench,
// an emulator): a stand-in that reads the running one at each use, so a file names it once, at
// the top, as a const, instead of a `let` that its own hooks assign.
export function currentOf<T extends object>(helper: string, get: () => T | undefined): T {
  const current = (): T => {
    const value = get();
    if (value === undefined) throw new Error(`${helper}: no test of its block is running`);
    return value;
  };
  // A Proxy forwards every member, so the stand-in keeps up with the type it stands for.
  return new Proxy({} as T, {
    get: (_target, member) => {
      const running = current();
      const value: unknown = Reflect.get(running, member);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(running) : value;
    },
  });
}
