// bench:bgp-core --stages: the receive path cut into cumulative stages, each doing the previous one's work and one
// layer more, so that the differences of their medians say what each layer costs. Pure: the split and the order.

/**
 * frame   the framer alone (messages found in the reads, nothing decoded);
 * decode  + the UPDATE decoder (attribute records included);
 * shared  + the import side and the RIB, every UPDATE of a family given one shared attribute set: the per-prefix
 *           work (prefix records, paths, the change feed) with the interner always hitting one held set;
 * full    + the interner with the table's own sets: what the daemon does.
 */
export const STAGES = ['frame', 'decode', 'shared', 'full'] as const;
export type Stage = (typeof STAGES)[number];

export interface StageSplit {
  /** Finding the messages in the reads. */
  framing: number;
  /** Decoding the UPDATEs, their attribute records included. */
  decoding: number;
  /** Prefix records, paths and the change feed: the RIB's work per prefix. */
  perPrefix: number;
  /** Hash-consing the table's distinct attribute sets (rows made, index grown) over reusing one held set. */
  interning: number;
  /** The full stage: the four above add up to it. */
  total: number;
}

/** Each layer's cost from the stages' medians (a difference can come out below 0 when a layer costs less than the noise). */
export function stageSplit(m: Readonly<Record<Stage, number>>): StageSplit {
  return {
    framing: m.frame,
    decoding: m.decode - m.frame,
    perPrefix: m.shared - m.decode,
    interning: m.full - m.shared,
    total: m.full,
  };
}

/**
 * The stages of round `i`, rotated by one each round: over any STAGES.length consecutive rounds every stage runs
 * once in every position, so none always runs first (after the collection between rounds) or last.
 */
export function stageOrder(i: number): Stage[] {
  const n = STAGES.length;
  const k = ((i % n) + n) % n;
  return [...STAGES.slice(k), ...STAGES.slice(0, k)];
}
