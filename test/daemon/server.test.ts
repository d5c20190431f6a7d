// --listen parsing (src/daemon/server.ts): the address forms an operator may give, and a usage
// error (exit 2) for anything else.
import { describe, expect, it } from 'vitest';
import { parseListenAddress } from '../../src/daemon/server.ts';

describe('parseListenAddress', () => {
  it('reads host:port, bracketed IPv6, a bare port (loopback) and :port (every IPv4 interface)', () => {
    expect(parseListenAddress('0.0.0.0:8080')).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(parseListenAddress('[::]:9000')).toEqual({ host: '::', port: 9000 });
    expect(parseListenAddress('localhost:0')).toEqual({ host: 'localhost', port: 0 });
    expect(parseListenAddress('8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseListenAddress(':8080')).toEqual({ host: '0.0.0.0', port: 8080 });
  });

  it('refuses anything else as a usage error (exit 2)', () => {
    for (const text of ['', 'host', '1.2.3.4:', '1.2.3.4:70000', '::1:8080', 'http://0.0.0.0:8080']) {
      expect(() => parseListenAddress(text), text).toThrow(
        expect.objectContaining({ code: 'KR_USAGE' }) as unknown,
      );
    }
  });
});
