// Paths inside a Windows HostProcess container. Its processes run on the host and see the host's drives, so
// "C:\ProgramData\blockspeaker" is the host's; the image's files and the pod's volumes (ConfigMap, Secret) are under
// the folder CONTAINER_SANDBOX_MOUNT_POINT names (containerd 1.6: C:\C\<id>\, 1.7 and later: C:\hpc\), at their
// mountPath. So a path with no drive that starts at the root ("/etc/blockspeaker/node.yaml", "\etc\...") is a path in
// the container and is read under the mount point; a path with a drive (or a UNC or pipe name, "\\...") is the
// host's and is left alone. Outside such a container (the variable unset) and on Linux nothing changes.
import { win32 } from 'node:path';
import type { PlatformId } from './paths.ts';

export const SANDBOX_ENV = 'CONTAINER_SANDBOX_MOUNT_POINT';

/** The mount point when this is a Windows HostProcess container, else undefined. */
export function sandboxRoot(id: PlatformId, env: Record<string, string | undefined>): string | undefined {
  const root = env[SANDBOX_ENV]?.trim();
  return id === 'win32' && root ? root : undefined;
}

/** Is `p` rooted without a drive ("/x", "\x"), i.e. a path in the container? */
export const containerRooted = (p: string): boolean => /^[\\/](?![\\/])/.test(p);

/** `p` as this process must open it: a container path under the mount point (see above), anything else unchanged. */
export function sandboxPath(id: PlatformId, env: Record<string, string | undefined>, p: string): string {
  const root = sandboxRoot(id, env);
  return root && containerRooted(p) ? win32.join(root, p) : p;
}
