// Keeping the process's memory to itself (invariant 3; issue 12). The secrets keyroll holds live
// in its heap, and Node offers no prctl(PR_SET_DUMPABLE, 0). What Node does allow is done here:
//   - SIGUSR1 gets a listener: without one, Node opens its inspector on 127.0.0.1:9229 when the
//     signal arrives, and any process on the machine (a sidecar in the same pod) could then
//     read every secret in memory through it;
//   - diagnostic reports (written only when Node's --report-* flags ask for them) leave out the
//     environment, which holds the credentials that `env:NAME` references point at.
// Core dumps are stopped outside the process: bin/keyroll runs `ulimit -c 0` before Node, and
// the container runs as non-root with a read-only root filesystem and no capabilities
// (docs/sanitizer.md, "Memory, core files and the inspector").

let hardened = false;

export function keepProcessMemoryPrivate(): void {
  if (hardened) return;
  hardened = true;
  process.on('SIGUSR1', () => {
    process.stderr.write('keyroll: SIGUSR1 ignored (keyroll does not open the inspector)\n');
  });
  process.report.excludeEnv = true;
}
