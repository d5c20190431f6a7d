// One watching process of bench/crd.ts: lists and watches every RotatedKey as the daemon's
// reflector does, and once the list is held prints how long that took and what the process
// holds in memory (after a full GC), then exits. A process of its own, so its RSS is the
// watch's and not the bench's (which made the objects).
//
//   node --expose-gc bench/crd-watch-child.ts <kube-info.json>
import { readFile } from 'node:fs/promises';
import { createMemoryAuditLog } from '../src/audit/logger.ts';
import { KubeResourceClient } from '../src/crd/watch/kube-client.ts';
import { Reflector } from '../src/crd/watch/reflector.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../test/support/kube-apiserver.ts';

export interface WatchSample {
  objects: number;
  syncMs: number;
  rssMb: number;
  heapUsedMb: number;
}

const infoFile = process.argv[2];
if (infoFile === undefined) throw new Error('usage: crd-watch-child.ts <kube-info.json>');
const info = JSON.parse(await readFile(infoFile, 'utf8')) as KubeApiServerInfo;
const reflector = new Reflector({
  requests: new KubeResourceClient(adminKubeConfig(info)),
  resource: { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' },
  audit: createMemoryAuditLog(),
});
const controller = new AbortController();
const started = performance.now();
const running = reflector.run(controller.signal);
await reflector.synced;
const syncMs = performance.now() - started;
globalThis.gc?.();
const memory = process.memoryUsage();
const mb = (bytes: number): number => Math.round((bytes / 1024 ** 2) * 10) / 10;
const sample: WatchSample = {
  objects: reflector.objects().size,
  syncMs: Math.round(syncMs),
  rssMb: mb(memory.rss),
  heapUsedMb: mb(memory.heapUsed),
};
process.stdout.write(`${JSON.stringify(sample)}\n`);
controller.abort();
await running;
