// OpenTelemetry's context on AsyncLocalStorage, with one addition: a scope whose active span can
// move. A rotation's steps follow one another inside the key's span (preflight, lock, …, finish),
// each entered in the middle of a function (Transaction.enter), not around a callback. So each
// `with` opens a scope (a cell: the context it was given, and the context active in it now), and a
// step makes itself the active context of the scope it starts in: every call made in that scope
// from then on, the background lock refreshes included, is a child of the current step. A scope
// opened inside (an instrumentation's `with` around an AWS SDK call) has a cell of its own, so a
// step changing never reaches into it; nothing outside the scope ever sees its steps.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, type Context, type ContextManager } from '@opentelemetry/api';

interface Scope {
  /** The context the scope was opened with: its steps are children of the span in it. */
  readonly opened: Context;
  /** The context active in the scope now: `opened`, or that of the current step. */
  active: Context;
}

export class ScopedContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Scope>();

  active(): Context {
    return this.#storage.getStore()?.active ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run({ opened: context, active: context }, () => fn.apply(thisArg, args));
  }

  bind<T>(context: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const fn = target as (...args: unknown[]) => unknown;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the manager, captured for the bound function's calls
    const manager = this;
    return function bound(this: unknown, ...args: unknown[]): unknown {
      return manager.with(context, () => fn.apply(this, args));
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }

  /** The context the current scope was opened with (ROOT_CONTEXT outside any scope). */
  opened(): Context {
    return this.#storage.getStore()?.opened ?? ROOT_CONTEXT;
  }

  /** Makes `context` the current scope's active one; outside any scope, does nothing. */
  activate(context: Context): void {
    const scope = this.#storage.getStore();
    if (scope !== undefined) scope.active = context;
  }
}
