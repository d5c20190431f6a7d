// The event Secrets Manager invokes a rotation function with (AWS documentation, "Lambda rotation
// functions"): one of four steps, the secret's ARN and the version the rotation works on. Parsed
// strictly as to the fields keyroll reads, tolerantly as to fields AWS may add later.
import { z } from 'zod';

export const ROTATION_STEPS = ['createSecret', 'setSecret', 'testSecret', 'finishSecret'] as const;
export type RotationEventStep = (typeof ROTATION_STEPS)[number];

export const RotationEvent = z.looseObject({
  Step: z.enum(ROTATION_STEPS),
  /** The secret's ARN (a name when invoked by hand). */
  SecretId: z.string().min(1),
  /** The version id of the rotation, and the ClientRequestToken of its put (32 to 64 characters). */
  ClientRequestToken: z.string().min(32).max(64),
});
export type RotationEvent = z.infer<typeof RotationEvent>;
