// kube-apiserver and etcd for the benchmarks that need a cluster (bench/ha.ts, bench/leak.ts), as
// the integration tests get them: built once per machine by scripts/test-kube.sh (cached), started
// by test/support/kube-apiserver.ts on free loopback ports.
import { spawnSync } from 'node:child_process';
import { startKubeApiServer, type RunningKubeApiServer } from '../../test/support/kube-apiserver.ts';
import { ROOT } from './cli.ts';

export async function startBenchKube(): Promise<RunningKubeApiServer> {
  const tools = spawnSync('sh', ['scripts/test-kube.sh'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const binDir = tools.stdout.trim().split('\n').pop();
  if (tools.status !== 0 || binDir === undefined || binDir === '')
    throw new Error(`scripts/test-kube.sh failed (exit ${String(tools.status)})`);
  return startKubeApiServer(binDir);
}
