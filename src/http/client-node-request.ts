// Per-request options for @kubernetes/client-node's API clients, shared by every caller of the
// Kubernetes API (consumers, the leader's Lease, the shared replay record): the caller's deadline
// as the request's AbortSignal and, for a patch, its content type. client-node takes both only as
// middleware, appended to its own.
import {
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

export function clientNodeRequest(signal: AbortSignal, contentType?: string): ConfigurationOptions {
  const middleware: ObservableMiddleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal);
      if (contentType !== undefined) context.setHeaderParam('Content-Type', contentType);
      return new Observable(Promise.resolve(context));
    },
    post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}
