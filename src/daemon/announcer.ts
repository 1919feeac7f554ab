// IPAM -> BGP: keeps a host's announcements equal to its IPAM route view.
//
// The store is watched; any IPAM change schedules a refresh: at once after a quiet spell (a new block's route is
// on its way to the peers the moment its claim is durable), else at most one refresh per debounceMs, so a burst of
// pod starts is a few refreshes, not one per pod.
// A refresh reads the host's route view (affine blocks + addresses it holds in others' blocks), turns it into the
// announcement set (blocks as aggregates, borrowed host routes, never more-specifics inside its own blocks,
// optional summarisation) and applies only the difference to the target.
import { parsePrefix, type Prefix } from '../net/ip.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { announcements, diffAnnouncements } from '../rib/aggregate.ts';
import type { Watcher } from '../store/types.ts';

export interface AnnounceTarget {
  announce(prefix: Prefix): void;
  withdraw(prefix: Prefix): boolean;
}

export interface AnnouncerOptions {
  /** Merge adjacent affine blocks into their parent when all of it is the host's. */
  summarise?: boolean;
  /** Refresh at most once per this many ms (a change after a quiet spell is refreshed at once). Default 10. */
  debounceMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
  onError?: (err: Error) => void;
  onChange?: (diff: { add: Prefix[]; withdraw: Prefix[] }) => void;
}

export class IpamAnnouncer {
  private current: Prefix[] = [];
  private watcher: Watcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** When the last scheduled refresh started. */
  private lastRun = -Infinity;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** Refreshes done and the last error, for the status endpoint. */
  readonly stats = { refreshes: 0, errors: 0, lastError: null as string | null };

  constructor(
    private readonly ipam: Ipam,
    private readonly host: string,
    private readonly target: AnnounceTarget,
    private readonly opts: AnnouncerOptions = {},
  ) {}

  /** What is announced now. */
  get announced(): readonly Prefix[] {
    return this.current;
  }

  async start(): Promise<void> {
    this.watcher = this.ipam.store.watch(this.ipam.ds.keys.root, await this.ipam.store.revision(), () => this.schedule());
    await this.refresh();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
  }

  private schedule(): void {
    if (this.stopped || this.timer || this.immediate) return;
    const now = this.opts.now ?? performance.now.bind(performance);
    const run = () => {
      this.timer = this.immediate = null;
      this.lastRun = now();
      void this.refresh();
    };
    const wait = this.lastRun + (this.opts.debounceMs ?? 10) - now();
    // setImmediate, not at once: the events of one commit arrive in one turn and make one refresh.
    if (wait <= 0) this.immediate = setImmediate(run);
    else this.timer = setTimeout(run, wait);
  }

  /** Bring the announcements up to date now. Concurrent calls coalesce into one more run. */
  refresh(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          const view = await this.ipam.routes(this.host);
          const next = announcements({
            blocks: view.aggregates.map(parsePrefix),
            borrowed: view.hosts.map(parsePrefix),
            summarise: this.opts.summarise ?? false,
          });
          const diff = diffAnnouncements(this.current, next);
          for (const p of diff.withdraw) this.target.withdraw(p);
          for (const p of diff.add) this.target.announce(p);
          this.current = next;
          this.stats.refreshes++;
          if (diff.add.length || diff.withdraw.length) this.opts.onChange?.(diff);
        } catch (e) {
          this.stats.errors++;
          this.stats.lastError = (e as Error).message;
          this.opts.onError?.(e as Error);
        }
      } while (this.again && !this.stopped);
      this.running = null;
    })();
    return this.running;
  }
}
