// What this build of keyroll carries. The container image is built without the emulator
// (`node scripts/build.ts --without-emulator` replaces this module and the emulator's server):
// its fault-injection routes are unauthenticated, and production has no use for a fake API.
// A checkout and the npm package keep it, for `keyroll demo`, `keyroll emulator` and the tests.

/** False in a build that left the emulator out; `emulator` and `demo` then say so and exit 2. */
export const EMULATOR_IN_BUILD: boolean = true;

export const EMULATOR_LEFT_OUT_MESSAGE =
  'is not in this build: the container image leaves the API emulator (and its unauthenticated fault routes) out. Run it from a checkout of keyroll (`npm run demo`, `npm run emulator`).';
