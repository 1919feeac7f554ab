// postject ships no types; this is the one function the build uses.
declare module 'postject' {
  export function inject(
    file: string,
    resource: string,
    data: Buffer,
    opts?: { sentinelFuse?: string; machoSegmentName?: string; overwrite?: boolean },
  ): Promise<void>;
}
