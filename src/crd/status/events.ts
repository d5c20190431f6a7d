// core/v1 Events on a keyroll.io object, so `kubectl describe` tells the story of its rotations.
// The message is built from typed facts by the caller and still goes through the sanitizer
// (every secret keyroll holds is blanked, in every encoding) and is cut to the size the API server
// keeps: an Event is readable by anyone who may read the namespace's events, never the secret.
import { hostname } from 'node:os';
import { truncateSanitized } from '../../audit/public/sanitize.ts';
import type { ObjectRequests } from '../watch/kube-client.ts';
import type { WatchedObject } from '../watch/resource.ts';
import { conditionTime } from './conditions.ts';

export type EventType = 'Normal' | 'Warning';

/** The reasons keyroll records (CamelCase, as `kubectl get events` shows them). */
export type EventReason =
  | 'Rotated'
  | 'RotationFailed'
  | 'Quarantined'
  | 'Resumed'
  | 'DriftDetected'
  | 'ConsumersRefreshed'
  | 'ConsumersFailed'
  | 'Refused'
  | 'RotateNowSettled';

/** The object an Event is about (its involvedObject). */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventRecord {
  involved: InvolvedObject;
  type: EventType;
  reason: EventReason;
  message: string;
}

/** The API server's cap on an Event's note (events.k8s.io); core/v1 keeps the same in practice. */
export const EVENT_MESSAGE_MAX = 1024;
const COMPONENT = 'keyroll';
const EVENTS = { group: '', version: 'v1', plural: 'events' } as const;

/** Creates one Event; throws CrdError (KR_CRD_FORBIDDEN without `create` on events). */
export async function recordEvent(
  requests: ObjectRequests,
  record: EventRecord,
  signal: AbortSignal,
  now: Date = new Date(),
): Promise<WatchedObject> {
  const time = conditionTime(now);
  const { involved } = record;
  const body = {
    apiVersion: 'v1',
    kind: 'Event',
    // client-go's recorder names Events the same way: the object's name and a unique suffix.
    metadata: { generateName: `${involved.name}.`, namespace: involved.namespace },
    involvedObject: {
      apiVersion: involved.apiVersion,
      kind: involved.kind,
      namespace: involved.namespace,
      name: involved.name,
      ...(involved.uid === undefined ? {} : { uid: involved.uid }),
      ...(involved.resourceVersion === undefined ? {} : { resourceVersion: involved.resourceVersion }),
    },
    type: record.type,
    reason: record.reason,
    message: truncateSanitized(record.message, EVENT_MESSAGE_MAX),
    source: { component: COMPONENT, host: hostname() },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  };
  return requests.create(EVENTS, involved.namespace, body, signal);
}
