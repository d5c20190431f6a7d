// The file backend's factory, as the registry loads it (src/backends/README.md).
import type { BackendFactory } from '../types.ts';
import { FileBackend } from './backend.ts';

export const createFileBackend: BackendFactory<'file'> = (name, config, deps) =>
  new FileBackend(name, config, deps);
