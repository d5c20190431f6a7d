// src/backends/schema.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export {
  FailureCoreFields,
  FailureStreakTimes,
  IntentFields,
  IsoInstant,
  LockInfo,
  ProbeRecord,
  RotationFields,
  badFields,
} from '../schema.ts';
