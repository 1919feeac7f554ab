// Noticing a rotated BGP password file (bgp.peers[].password, bgp.nodeMeshPassword, selector peers'): the speaker
// reads a password when a peer is configured, so without this a new key would wait for the next restart or reload,
// and the two ends of a session would disagree as soon as the other end took the new key. Kubernetes rotates a
// mounted Secret by swapping a symlink (the path stays, what it resolves to changes) and an operator rewrites the
// file in place; a stat poll (fs.watchFile, which follows the symlink) sees both, where inotify on the path would
// miss the swap. A change is applied once the file has been quiet for `settleMs`, so a half-written file is not read.
import { unwatchFile, watchFile, type Stats } from 'node:fs';

export interface PasswordWatchOptions {
  /** How often each file is stat'ed (default 2000 ms). */
  intervalMs?: number;
  /** Quiet time after the last change before `onChange` runs (default 500 ms). */
  settleMs?: number;
}

export class PasswordWatch {
  private files = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly intervalMs: number;
  private readonly settleMs: number;
  private readonly listener = (cur: Stats, prev: Stats) => {
    if (cur.mtimeMs === prev.mtimeMs && cur.ino === prev.ino && cur.size === prev.size && cur.ctimeMs === prev.ctimeMs) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onChange(), this.settleMs);
    this.timer.unref();
  };

  constructor(private readonly onChange: () => void, opts: PasswordWatchOptions = {}) {
    this.intervalMs = opts.intervalMs ?? 2000;
    this.settleMs = opts.settleMs ?? 500;
  }

  /** Watch exactly these files (a reload may add or drop some). */
  set(files: Iterable<string>): void {
    const next = new Set(files);
    for (const f of this.files) if (!next.has(f)) unwatchFile(f, this.listener);
    for (const f of next) if (!this.files.has(f)) watchFile(f, { interval: this.intervalMs, persistent: false }, this.listener);
    this.files = next;
  }

  get watched(): string[] {
    return [...this.files];
  }

  close(): void {
    this.set([]);
    clearTimeout(this.timer);
  }
}
