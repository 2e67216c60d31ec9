// When a crashed server is started again. A server that dies right after every start (a broken
// install, a model that crashes the runtime) must not be respawned forever, so restarts are
// counted in a sliding window. No `vscode` import.

export class RestartBudget {
  private readonly restarts: number[] = [];

  /**
   * @param maxRestarts restarts allowed within `windowMs`
   * @param windowMs length of the sliding window in milliseconds
   */
  constructor(
    readonly maxRestarts = 5,
    readonly windowMs = 3 * 60_000,
  ) {}

  /** Records a crash at `now` and says whether to restart. */
  tryRestart(now: number): boolean {
    while (this.restarts.length > 0 && now - this.restarts[0] >= this.windowMs) this.restarts.shift();
    if (this.restarts.length >= this.maxRestarts) return false;
    this.restarts.push(now);
    return true;
  }

  /** A manual restart starts with a full budget. */
  reset(): void {
    this.restarts.length = 0;
  }
}
