// The servers the benchmarks write to, from the venv bench/setup.sh installs: the same
// start-up code as the integration tests (test/support/local-servers.ts).
import {
  startMoto as startMotoIn,
  startOpenBao as startOpenBaoIn,
  type OpenBao,
  type RunningServer,
} from '../../test/support/local-servers.ts';

export { MOTO_ENV, type OpenBao, type RunningServer } from '../../test/support/local-servers.ts';

/** The venv bin directory holding `bao` and `moto_server` (bench/setup.sh exports it). */
export function serverBinDir(): string {
  const dir = process.env.KEYROLL_BENCH_BIN;
  if (dir === undefined || dir === '')
    throw new Error('KEYROLL_BENCH_BIN is not set: run the benchmarks with `npm run bench` (bench/run.sh)');
  return dir;
}

export function startOpenBao(binDir = serverBinDir()): Promise<OpenBao> {
  return startOpenBaoIn(binDir);
}

export function startMoto(binDir = serverBinDir()): Promise<RunningServer> {
  return startMotoIn(binDir);
}
