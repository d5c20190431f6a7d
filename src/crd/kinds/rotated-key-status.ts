// RotatedKey's status subresource, written by the Lease leader only (issue 31). Conditions follow
// metav1.Condition, so kubectl, Argo CD and `kubectl wait --for=condition=Ready` read them as they
// read any other object's. No field here ever holds the secret: messages say what happened to it.
import { z } from 'zod';

export const CONDITION_TYPES = ['Ready', 'Rotating', 'ConsumersRefreshed', 'Quarantined', 'Drifted'] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

const Timestamp = z.iso.datetime().describe('An RFC 3339 time in UTC.');

/** metav1.Condition, with the limits Kubernetes sets on its fields. */
export const Condition = z.strictObject({
  type: z.enum(CONDITION_TYPES),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().min(0).optional(),
  lastTransitionTime: Timestamp.describe(
    'When status last changed (not when the condition was last written).',
  ),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/, { error: 'must be a CamelCase reason' })
    .describe('A CamelCase word for programs (Rotated, RotationFailed, Refused, ...).'),
  message: z.string().max(32768).describe('What happened, for people; never the secret.'),
});
export type Condition = z.infer<typeof Condition>;

export const RotateNowStatus = z
  .strictObject({
    value: z.string().describe('The keyroll.io/rotate-now annotation as it was set.'),
    requestedBy: z
      .string()
      .optional()
      .describe(
        'The field manager that set the annotation (from managedFields); the requesting user is in the API audit log only.',
      ),
    settledAt: Timestamp.optional(),
    outcome: z.string().min(1).optional().describe('How the request ended (a CamelCase reason).'),
  })
  .describe('The last rotate-now request and how it was settled.');
export type RotateNowStatus = z.infer<typeof RotateNowStatus>;

export const RotatedKeyStatus = z.strictObject({
  observedGeneration: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('The generation of the spec the status is about.'),
  conditions: z
    .array(Condition)
    .optional()
    .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] }),
  lastRotated: Timestamp.optional(),
  nextRotation: Timestamp.optional(),
  activeSlot: z.string().optional().describe('Slot entries: the API key id consumers read now.'),
  failedAttempts: z.number().int().min(0).optional().describe('Consecutive failed rotations.'),
  lastRotationId: z.string().optional().describe('The rotation id of the last rotation (audit trail).'),
  rotateNow: RotateNowStatus.optional(),
});
export type RotatedKeyStatus = z.infer<typeof RotatedKeyStatus>;
