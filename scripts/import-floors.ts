// The floors of src/, bottom first (docs/layout.md says what each folder holds and why it stands
// where it does). A folder imports only from folders on floors below its own: never from one on
// its own floor nor above, so no import climbs a floor and no two folders form a circle. The files
// directly in src/ (errors.ts, install-files.ts) are the ground floor. `npm run lint:imports`
// (.dependency-cruiser.js, part of `npm run lint`) holds every import to it.

/** Stands for the files directly in src/. */
export const SRC_ROOT_FILES = '(src root files)';

export const FLOORS: readonly (readonly string[])[] = [
  [SRC_ROOT_FILES, 'http'],
  ['audit'],
  ['refs', 'inbound', 'tracing'],
  ['api'],
  ['backends', 'alerts', 'emulator'],
  ['policy'],
  ['rotation'],
  ['consumers', 'lambda'],
  ['metrics', 'leader'],
  ['scheduler', 'leaks', 'monitoring', 'crd'],
  ['daemon'],
  ['cli'],
];
