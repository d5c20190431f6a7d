// src/rotation/types.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { isLeakReason } from '../types.ts';
export type {
  HolderDeathProof,
  HolderProver,
  KeyOutcome,
  KeyResult,
  ResolvedDestination,
  RotationDeps,
  RotationObserver,
  RotationReason,
  RotationStep,
  RunTrigger,
} from '../types.ts';
