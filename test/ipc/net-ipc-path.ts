// The path to give net-ipc's own Client (the oracle of the wire tests; blockspeaker itself speaks the format through
// src/ipc/wire.ts and never loads net-ipc): net-ipc adds the pipe prefix itself on Windows.
import { socketEndpoint } from '../../src/platform/paths.ts';

const PIPE_PREFIX = '\\\\.\\pipe\\';

export function netIpcPath(path: string, id?: string): string {
  if ((id ?? process.platform) !== 'win32') return path;
  return socketEndpoint(path, 'win32').slice(PIPE_PREFIX.length);
}
