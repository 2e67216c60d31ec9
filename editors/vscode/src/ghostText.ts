// Growing ghost text. The server answers textDocument/inlineCompletion early and keeps sending the
// whole, longer suggestion in `ghostfim/ghostText` notifications. VS Code has no API to push new
// text into a visible inline suggestion, so the extension keeps the latest notification for the
// editor's current (uri, version, cursor) here, asks VS Code to re-query the provider, and the
// provider answers from this store instead of sending a new request (a new request would
// supersede the one still generating). No `vscode` import: the rules are unit-tested.

import type { GhostTextParams, Position } from './protocol';

/** Where the user is: the document, its version, and a single empty cursor. */
export interface EditorState {
  uri: string;
  version: number;
  position: Position;
}

export function sameState(a: EditorState, b: EditorState): boolean {
  return (
    a.uri === b.uri &&
    a.version === b.version &&
    a.position.line === b.position.line &&
    a.position.character === b.position.character
  );
}

/** What the store decided about one notification. */
export type GhostTextDecision =
  /** Newer text for the editor's current state: re-query the provider to show it. */
  | 'show'
  /** Kept, but nothing visible changes (same text again). */
  | 'unchanged'
  /** For another document, version or cursor position, or the user dismissed it. */
  | 'stale';

function stateKey(state: EditorState): string {
  return `${state.version}:${state.position.line}:${state.position.character}`;
}

/**
 * The latest ghost text per document, for the (version, position) the notification was for.
 * One entry per document is enough: text for an older version or another cursor position can
 * never be shown again, since the protocol says to drop it unless it matches the editor's state.
 */
export class GhostTextStore {
  private readonly latest = new Map<string, GhostTextParams>();
  /** Per document: the state at which the user dismissed the suggestion (Escape). */
  private readonly dismissed = new Map<string, string>();

  /**
   * Records a notification, given the state of the editor showing its document (undefined when no
   * focused editor shows it, or it has several or non-empty selections).
   */
  record(update: GhostTextParams, current: EditorState | undefined): GhostTextDecision {
    if (current === undefined || !sameState(update, current)) return 'stale';
    if (this.dismissed.get(update.uri) === stateKey(update)) return 'stale';
    const previous = this.latest.get(update.uri);
    this.latest.set(update.uri, update);
    if (previous !== undefined && sameState(previous, update) && previous.insertText === update.insertText) {
      return 'unchanged';
    }
    return 'show';
  }

  /** The stored suggestion for exactly this state, if any (and not dismissed). */
  lookup(state: EditorState): GhostTextParams | undefined {
    const entry = this.latest.get(state.uri);
    if (entry === undefined || !sameState(entry, state)) return undefined;
    if (this.dismissed.get(state.uri) === stateKey(state)) return undefined;
    return entry;
  }

  /** The user hid the suggestion here: later growth for this state must not bring it back. */
  dismiss(state: EditorState): void {
    this.dismissed.set(state.uri, stateKey(state));
    this.latest.delete(state.uri);
  }

  forgetDocument(uri: string): void {
    this.latest.delete(uri);
    this.dismissed.delete(uri);
  }

  clear(): void {
    this.latest.clear();
    this.dismissed.clear();
  }

  get size(): number {
    return this.latest.size;
  }
}

/**
 * Picks the text to show for a fresh server answer: the answer itself, unless a growth
 * notification for the same state already arrived with a longer continuation of it.
 */
export function preferGrownText(answer: string, stored: GhostTextParams | undefined): string {
  if (stored !== undefined && stored.insertText.length > answer.length && stored.insertText.startsWith(answer)) {
    return stored.insertText;
  }
  return answer;
}

/**
 * Runs an async task on request, never twice at once: requests that arrive while it runs are
 * folded into one more run afterwards. Notifications can come per generated token; the
 * re-query they cause only needs to happen as fast as VS Code can answer it.
 */
export class CoalescingRunner {
  private running = false;
  private pending = false;
  private disposed = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {}

  request(): void {
    if (this.disposed) return;
    if (this.running) {
      this.pending = true;
      return;
    }
    void this.loop();
  }

  dispose(): void {
    this.disposed = true;
    this.pending = false;
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      do {
        this.pending = false;
        try {
          await this.task();
        } catch (error) {
          this.onError(error);
        }
      } while (this.pending && !this.disposed);
    } finally {
      this.running = false;
    }
  }
}
