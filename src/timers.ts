// Timers that never hold a process open: Node's and Bun's have `unref`, Deno's are unref'd through
// `Deno.unrefTimer`, and those of Workers and browsers belong to no process to hold.

/** Lets the process exit while `timer` is pending, on the runtimes whose timers could keep it alive. */
export function unrefTimer(timer: unknown): void {
  if (typeof timer === 'object' && timer !== null) {
    (timer as { unref?: () => void }).unref?.();
    return;
  }
  const deno = (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
  if (typeof timer === 'number') deno?.unrefTimer?.(timer);
}

/** Runs `task` on a later turn of the event loop: Node's, Bun's and Deno's `setImmediate`, else a 0 ms timeout. */
export const nextTurn: (task: () => void) => void =
  typeof setImmediate === 'function' ? (task) => void setImmediate(task) : (task) => void setTimeout(task, 0);
