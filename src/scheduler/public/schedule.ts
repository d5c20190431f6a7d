// src/scheduler/schedule.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { groupSchedules, startSchedules } from '../schedule.ts';
export type { ScheduleInfo } from '../schedule.ts';
