// src/inbound/replay-records.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export {
  REPLAY_SOURCES,
  ReplayRecords,
  describeReplayStore,
  replayConfigMapName,
} from '../replay-records.ts';
