// Error accounting per peer and kind, kept across sessions (the session's own counters restart with it): RFC 7606
// actions by attribute, NOTIFICATIONs sent and received by code/subcode, max-prefix trips by family. Shown in
// /peers/ADDR and exported as the blockspeaker_bgp_errors_total metric.
import { ATTR_NAMES } from './codec/index.ts';
import type { AttrProblem } from './codec/index.ts';

export type PeerErrorKind = 'treat-as-withdraw' | 'attribute-discard' | 'notification-sent' | 'notification-received' | 'max-prefix'
  /** BFD declared the path down and closed the session; detail: the BGP state it was in */
  | 'bfd-down';

/** kind -> detail -> count; detail is an attribute name, "code/subcode", or a family. */
export type PeerErrorCounts = Partial<Record<PeerErrorKind, Record<string, number>>>;

export class PeerErrors {
  private readonly counts: PeerErrorCounts = {};

  add(kind: PeerErrorKind, detail: string, n = 1): void {
    const k = (this.counts[kind] ??= {});
    k[detail] = (k[detail] ?? 0) + n;
  }

  /** One UPDATE's RFC 7606 problems: each attribute counted once under the action taken on it. */
  addProblems(problems: readonly AttrProblem[]): void {
    const seen = new Set<string>();
    for (const p of problems) {
      const kind = p.action === 'withdraw' ? 'treat-as-withdraw' : 'attribute-discard';
      const detail = p.attrType === 0 ? 'attribute list' : (ATTR_NAMES[p.attrType] ?? `attribute ${p.attrType}`);
      const key = `${kind} ${detail}`;
      if (seen.has(key)) continue;
      seen.add(key);
      this.add(kind, detail);
    }
  }

  addNotification(direction: 'sent' | 'received', code: number, subcode: number): void {
    this.add(direction === 'sent' ? 'notification-sent' : 'notification-received', `${code}/${subcode}`);
  }

  snapshot(): PeerErrorCounts {
    const out: PeerErrorCounts = {};
    for (const [k, v] of Object.entries(this.counts)) out[k as PeerErrorKind] = { ...v };
    return out;
  }
}
