// The process keeps its memory to itself as far as Node allows (issue 12, section 3): bin/keyroll
// turns core files off, and SIGUSR1 does not open the inspector (which would let any local
// process read the secrets in the heap).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { useCliFixture } from '../cli/harness.ts';

const cli = useCliFixture();

describe('a running keyroll process', () => {
  it('has no core files and ignores SIGUSR1 instead of opening the inspector', async () => {
    await cli.writePolicy();
    const running = cli.spawn(['daemon', '-p', 'policy.yaml', '--listen', '127.0.0.1:0'], { viaBin: true });
    await running.stderrIncludes('serving on');
    const pid = running.child.pid!;

    const limits = await readFile(`/proc/${String(pid)}/limits`, 'utf8');
    running.child.kill('SIGUSR1');
    await running.stderrIncludes('SIGUSR1 ignored');
    running.child.kill('SIGTERM');
    const result = await running.result;

    expect(limits).toMatch(/^Max core file size\s+0\s/m);
    expect(result.stderr).not.toContain('Debugger listening');
    expect(result.code).toBe(0);
  });
});
