// The running-marker: present while a daemon runs, removed on a full stop, kept on a graceful-restart stop. Found
// at start (same boot, its process gone) = the previous run did not stop for good, so its routes are still
// installed and the peers may hold ours as stale: start as a graceful-restart "restarting speaker" (R bit).
//
// It records the boot it was written in, so a marker that survived a reboot (Windows has no tmpfs /run) is
// ignored, and it is keyed by the store it guards and the node name (not by node name alone), so two daemons with
// the same node name on different stores (as in tests) do not share one, daemons of different nodes may share a
// store directory (a supported layout), and a second daemon of the same node on the same store is refused.
import path from 'node:path';
import { pathKey, type Platform } from './platform.ts';
import { createFile, PRIVATE_FILE_MODE, readTextFile, writeAll } from './atomic-file.ts';

export interface MarkerRecord {
  pid: number;
  /** Platform.bootId() when written. */
  boot: string;
  /** What the marker guards (the store). */
  guards: string;
}

/** Another daemon is alive on the same store. */
export class RunMarkerError extends Error {
  override name = 'RunMarkerError';
}

export interface Claim {
  /** The previous run left its marker in this boot: start as a restarting speaker. */
  restarted: boolean;
  /** Why (for the log), when a marker was found. */
  note?: string;
}

/** The thing a daemon's marker guards: this node's state in its store (or its config file, without a store). */
export function markerSubject(store: string | undefined, node: string, configFile: string): string {
  const base = store === undefined ? `config:${path.resolve(configFile)}` : /^etcds?:\/\//.test(store) ? store : `file:${path.resolve(store)}`;
  return `${base}#${node}`;
}

/** "node-a on /var/lib/blockspeaker" from a subject. */
function describe(guards: string): string {
  const i = guards.lastIndexOf('#');
  return `${guards.slice(i + 1)} on ${guards.slice(0, i).replace(/^(file|config):/, '')}`;
}

export class RunMarker {
  readonly path: string;

  constructor(
    runDir: string,
    node: string,
    readonly guards: string,
    private readonly platform: Platform,
  ) {
    // The node name stays in the file name for people; the hash of the store makes it unique.
    this.path = path.join(runDir, `${node.replace(/[^A-Za-z0-9.-]/g, '_')}-${pathKey(guards)}.running`);
  }

  /** Read the marker, decide, and write ours. Throws RunMarkerError (nothing written) when a live daemon owns it. */
  claim(): Claim {
    const p = this.platform;
    const now = p.bootId();
    let claim: Claim = { restarted: false };
    const prev = this.read();
    if (prev) {
      if (prev.boot !== '' && !p.sameBoot(prev.boot, now)) {
        claim = { restarted: false, note: `marker ${this.path} is from an earlier boot: our routes are gone, a fresh start` };
      } else if (prev.pid > 0 && prev.pid !== process.pid && p.processAlive(prev.pid)) {
        throw new RunMarkerError(
          `another blockspeaker daemon (pid ${prev.pid}) is running as ${describe(this.guards)} ` +
            `(marker ${this.path}); stop it first, or remove the marker if pid ${prev.pid} is not blockspeaker`,
        );
      } else {
        claim = { restarted: true, note: `marker ${this.path} left by pid ${prev.pid}: the previous run did not stop for good` };
      }
    }
    const rec: MarkerRecord = { pid: process.pid, boot: now, guards: this.guards };
    const dir = path.dirname(this.path);
    p.files.mkdirp(dir);
    const tmp = `${this.path}.${process.pid}.tmp`;
    const fd = createFile(p.files, tmp, PRIVATE_FILE_MODE); // 0600 before its first byte, like the run dir's 0700
    try {
      writeAll(fd, `${JSON.stringify(rec)}\n`);
    } finally {
      p.files.close(fd);
    }
    p.replaceFile(tmp, this.path);
    return claim;
  }

  release(): void {
    this.platform.files.remove(this.path);
  }

  /** The marker's record; an old plain-pid marker reads with an unknown boot. undefined when absent. */
  read(): MarkerRecord | undefined {
    const text = readTextFile(this.platform, this.path);
    if (text === undefined) return undefined;
    const t = text.trim();
    if (/^\d+$/.test(t)) return { pid: Number(t), boot: '', guards: this.guards };
    try {
      const r = JSON.parse(t) as Partial<MarkerRecord>;
      return { pid: Number(r.pid) || 0, boot: typeof r.boot === 'string' ? r.boot : '', guards: this.guards };
    } catch {
      return { pid: 0, boot: '', guards: this.guards }; // torn by a crash: a dead run of this boot
    }
  }
}
