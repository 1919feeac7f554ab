// Minimal typings for the parts of fs-native-extensions (CommonJS, ships no types) that the file store uses.
declare module 'fs-native-extensions' {
  interface LockOptions {
    shared?: boolean;
  }
  /** Non-blocking lock on the open file description; false when another holder has it. */
  export function tryLock(fd: number, opts?: LockOptions): boolean;
  export function tryLock(fd: number, offset: number, length: number, opts?: LockOptions): boolean;
  /** Resolves once the lock is granted (waits on a libuv threadpool thread). */
  export function waitForLock(fd: number, opts?: LockOptions): Promise<void>;
  export function waitForLock(fd: number, offset: number, length: number, opts?: LockOptions): Promise<void>;
  export function unlock(fd: number, offset?: number, length?: number): void;
  const fsx: {
    tryLock: typeof tryLock;
    waitForLock: typeof waitForLock;
    unlock: typeof unlock;
  };
  export default fsx;
}
