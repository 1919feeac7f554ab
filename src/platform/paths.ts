// Which OS this process runs on, and the path rules that differ between Linux and Windows. This file is the only
// place in src/ that reads process.platform; it has no runtime imports, so the CNI plugin and the IPC protocol can
// load it for nothing. Everything else asks a Platform (./platform.ts), which tests replace with a Windows double.

/** The two platforms blockspeaker knows. Anything that is not Windows is treated as Linux (POSIX). */
export type PlatformId = 'linux' | 'win32';

/** The platform of this process, read once. */
export const HOST_PLATFORM: PlatformId = process.platform === 'win32' ? 'win32' : 'linux';

export interface DefaultPaths {
  /** The embedded store directory (config ipam.store). */
  store: string;
  /** The node config file the service runs with. */
  config: string;
  /** The control socket (a Unix socket) or named pipe (config ipc.path). */
  ipcPath: string;
  /** Where the running-marker lives (Linux: a tmpfs; Windows: beside the store, the marker records the boot). */
  runDir: string;
}

const PIPE_PREFIX = '\\\\.\\pipe\\';

export function defaultPaths(id: PlatformId = HOST_PLATFORM): DefaultPaths {
  if (id === 'win32') {
    return {
      store: 'C:\\ProgramData\\blockspeaker',
      config: 'C:\\ProgramData\\blockspeaker\\node.yaml',
      ipcPath: `${PIPE_PREFIX}blockspeaker`,
      runDir: 'C:\\ProgramData\\blockspeaker\\run',
    };
  }
  return { store: '/var/lib/blockspeaker', config: '/etc/blockspeaker/node.yaml', ipcPath: '/run/blockspeaker.sock', runDir: '/run/blockspeaker' };
}

/**
 * Where a socket path really lives. On Windows a path that is not already a pipe name becomes one the way net-ipc
 * builds it (leading "/" dropped, "/" -> "-"), so "/run/blockspeaker.sock" names the same pipe for both sides.
 */
export function socketEndpoint(path: string, id: string = HOST_PLATFORM): string {
  if (id !== 'win32' || path.startsWith(PIPE_PREFIX)) return path;
  return PIPE_PREFIX + path.replace(/^\//, '').replace(/\//g, '-');
}

/**
 * Windows: the file holding the key the daemon proves itself with on the pipe named by `path` (src/ipc/proof.ts), in
 * an admin-only folder under the default store folder, so a client that knows only the pipe finds it. Linux: none
 * (the socket lives in root's /run, where nobody else can take its name).
 */
export function ipcKeyFile(path: string, id: PlatformId = HOST_PLATFORM): string | undefined {
  if (id !== 'win32') return undefined;
  return `${defaultPaths('win32').store}\\pipe-keys\\${pipeKeyName(path)}`;
}

/** The key file's name for a pipe: its name without the \\.\pipe\ prefix, lower-cased (pipe names ignore case). */
export function pipeKeyName(path: string): string {
  return `${socketEndpoint(path, 'win32').slice(PIPE_PREFIX.length).toLowerCase().replace(/[^a-z0-9._-]/g, '_')}.key`;
}
