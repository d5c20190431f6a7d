// The RotatedKey status as a pure function of what keyroll knows of the key (key-facts.ts), a
// refusal when the tenancy checks left the key out, and the status stored on the object
// (docs/crds.md, "Status"). The same facts give the same status, whatever the clock says: times in
// it come from records, and a condition's lastTransitionTime moves only when its status flips
// (mergeConditions), so the reporter writes only when something changed. Messages are built from
// codes, ids and times only, never from an error's text: no secret can reach them.
import type { RotateNowStatus } from '../kinds/rotated-key-status.ts';
import { mergeConditions, type Condition, type DesiredCondition } from '../status/conditions.ts';
import type { Json } from '../status/merge-patch.ts';
import type { JsonObject } from '../status/status-writer.ts';
import { statusTime, type ConsumersFact, type KeyFacts } from './key-facts.ts';

/** Why a key is not rotated: the tenancy checks' refusal (src/crd/policy/refusal.ts). */
export interface StatusRefusal {
  reason: string;
  message: string;
}

export interface StatusInput {
  /** Undefined until the key's record was read (or when the key is refused). */
  facts?: KeyFacts | undefined;
  refusal?: StatusRefusal | undefined;
  /** The object's metadata.generation the status is computed from. */
  generation: number;
  /** The status stored on the object, as read. */
  stored?: JsonObject | undefined;
  /** A rotate-now request settled now; absent: the stored one stays. */
  rotateNow?: RotateNowStatus | undefined;
  now: Date;
}

const condition = (
  type: string,
  status: DesiredCondition['status'],
  reason: string,
  message: string,
): DesiredCondition => ({ type, status, reason, message });

function ready(facts: KeyFacts): DesiredCondition {
  if (facts.readError !== undefined)
    return condition(
      'Ready',
      'Unknown',
      'StateUnreadable',
      `the key's record at its primary destination could not be read (${facts.readError.errorCode})`,
    );
  if (facts.quarantinedAt !== undefined)
    return condition(
      'Ready',
      'False',
      'Quarantined',
      `quarantined since ${facts.quarantinedAt} after ${String(facts.failedAttempts)} failed rotations: keyroll resume, or a rotate-now`,
    );
  if (facts.driftedAt !== undefined)
    return condition(
      'Ready',
      'False',
      'Drifted',
      `the stored secret was found dead at ${facts.driftedAt} (rolled outside keyroll)`,
    );
  if (facts.intent !== undefined)
    return condition(
      'Ready',
      'False',
      'RotationIncomplete',
      `rotation ${facts.intent.rotationId} began at ${facts.intent.startedAt} and is not finished`,
    );
  if (facts.failedAttempts > 0 && facts.lastFailure !== undefined)
    return condition(
      'Ready',
      'False',
      'RotationFailed',
      `${String(facts.failedAttempts)} failed rotation(s) in a row; the last failed at step ${facts.lastFailure.step} (${facts.lastFailure.errorCode})`,
    );
  if (facts.lastRotatedAt === undefined)
    return condition('Ready', 'False', 'NeverRotated', 'keyroll has not rotated this key yet; it is due now');
  return condition(
    'Ready',
    'True',
    'Rotated',
    `rotated at ${facts.lastRotatedAt}${facts.lastRotationId === undefined ? '' : ` (rotation ${facts.lastRotationId})`}`,
  );
}

function rotating(facts: KeyFacts): DesiredCondition {
  return facts.intent === undefined
    ? condition('Rotating', 'False', 'Idle', 'no rotation is under way')
    : condition(
        'Rotating',
        'True',
        'IntentPending',
        `rotation ${facts.intent.rotationId} began at ${facts.intent.startedAt}; the next run repairs it if its runner died`,
      );
}

function consumersRefreshed(consumers: ConsumersFact | undefined): DesiredCondition {
  const type = 'ConsumersRefreshed';
  if (consumers === undefined) return condition(type, 'True', 'NoConsumers', 'the key lists no consumers');
  const of = `${String(consumers.affected ?? 0)} of ${String(consumers.count)} consumer(s)`;
  switch (consumers.state) {
    case 'unknown':
      return condition(type, 'Unknown', 'NotReported', 'no refresh reported since keyroll started');
    case 'pending':
      return condition(
        type,
        'False',
        'RefreshPending',
        'the last rotation is being delivered to its consumers',
      );
    case 'refreshed':
      return condition(type, 'True', 'Refreshed', 'every consumer holds the value of the last rotation');
    case 'not-needed':
      return condition(type, 'True', 'NotNeeded', 'the last rotation left the value consumers hold alive');
    case 'deferred':
      return condition(type, 'False', 'RefreshDeferred', `${of} wait for their restart window`);
    case 'failed':
      return condition(type, 'False', 'RefreshFailed', `${of} could not be refreshed (see the audit trail)`);
  }
}

/** The five conditions the facts decide (docs/crds.md, "Status": which fact drives which). */
export function desiredConditions(facts: KeyFacts): DesiredCondition[] {
  return [
    ready(facts),
    rotating(facts),
    consumersRefreshed(facts.consumers),
    facts.quarantinedAt === undefined
      ? condition('Quarantined', 'False', 'NotQuarantined', 'automatic rotations run')
      : condition(
          'Quarantined',
          'True',
          'FailureStreak',
          `no automatic rotation since ${facts.quarantinedAt}: keyroll resume, or a rotate-now`,
        ),
    facts.driftedAt === undefined
      ? condition(
          'Drifted',
          'False',
          'NoDrift',
          'no drift probe found the stored secret dead since the last rotation',
        )
      : condition(
          'Drifted',
          'True',
          'StoredSecretDead',
          `the stored secret was found dead at ${facts.driftedAt}`,
        ),
  ];
}

/** Before the record was read: every condition Unknown, so nothing claims what keyroll does not know. */
const PENDING: DesiredCondition[] = ['Ready', 'Rotating', 'ConsumersRefreshed', 'Quarantined', 'Drifted'].map(
  (type) => condition(type, 'Unknown', 'Pending', "keyroll has not read this key's record yet"),
);

function storedConditions(stored: JsonObject | undefined): Condition[] | undefined {
  const conditions = stored?.conditions;
  return Array.isArray(conditions) ? (conditions as unknown as Condition[]) : undefined;
}

/**
 * The whole status the object should carry. A refused key says so in Ready (the refusal's reason
 * and message) and keeps every other field as stored: those are past facts, still true. Fields of
 * the stored status keyroll does not compute are kept.
 */
export function keyStatus(input: StatusInput): JsonObject {
  const { facts, refusal, generation, now } = input;
  const stored = input.stored ?? {};
  const desired =
    refusal !== undefined
      ? [condition('Ready', 'False', refusal.reason, refusal.message)]
      : facts === undefined
        ? PENDING
        : desiredConditions(facts);
  const status: JsonObject = {
    ...stored,
    observedGeneration: generation,
    conditions: mergeConditions(storedConditions(stored), desired, generation, now) as unknown as Json[],
  };
  // An unreadable record says nothing new about the key: the stored fields stay.
  const withFacts =
    refusal === undefined && facts !== undefined && facts.readError === undefined
      ? { ...withoutFactFields(status), ...factFields(facts) }
      : status;
  return input.rotateNow === undefined
    ? withFacts
    : { ...withFacts, rotateNow: rotateNowJson(input.rotateNow) };
}

/** The status fields the facts decide (the printer columns read them). */
const FACT_FIELDS: readonly string[] = [
  'lastRotated',
  'nextRotation',
  'activeSlot',
  'failedAttempts',
  'lastRotationId',
];

function withoutFactFields(status: JsonObject): JsonObject {
  return Object.fromEntries(Object.entries(status).filter(([field]) => !FACT_FIELDS.includes(field)));
}

/** The fields the facts decide; a fact keyroll does not have leaves its field out (removed). */
function factFields(facts: KeyFacts): JsonObject {
  const lastRotated = facts.lastRotatedAt === undefined ? undefined : statusTime(facts.lastRotatedAt);
  return {
    ...(lastRotated === undefined ? {} : { lastRotated }),
    ...(facts.nextRotation === undefined ? {} : { nextRotation: facts.nextRotation }),
    ...(facts.activeSlot === undefined ? {} : { activeSlot: facts.activeSlot }),
    failedAttempts: facts.failedAttempts,
    ...(facts.lastRotationId === undefined ? {} : { lastRotationId: facts.lastRotationId }),
  };
}

/** The settled request as JSON: absent fields left out (an undefined would read as a difference). */
function rotateNowJson(settled: RotateNowStatus): JsonObject {
  return {
    value: settled.value,
    ...(settled.requestedBy === undefined ? {} : { requestedBy: settled.requestedBy }),
    ...(settled.settledAt === undefined ? {} : { settledAt: settled.settledAt }),
    ...(settled.outcome === undefined ? {} : { outcome: settled.outcome }),
  };
}
