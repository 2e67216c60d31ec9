// Growing ghost text. The server answers textDocument/inlineCompletion early and keeps sending the
// whole, longer suggestion in `ghostfim/ghostText` notifications. VS Code has no stable API to
// push new text into a visible inline suggestion, so the extension keeps the latest notification
// for the editor's current (uri, version, cursor) here, asks VS Code to re-query the provider,
// and the provider answers from this store instead of sending a new request (a new request would
// supersede the one still generating). VS Code re-queries a state once (GhostTextSync), so that
// answer waits for the generation to finish (whenDone). No `vscode` import: unit-tested.

import type { GhostTextParams, Position } from './protocol';

/** Where the user is: the document, its version, and a single empty cursor. */
export interface EditorState {
  uri: string;
  version: number;
  position: Position;
  /**
   * The text of the cursor's line, when known. It lets a suggestion made a few keystrokes ago be
   * shown over the characters typed since (see typedSince).
   */
  lineText?: string;
}

/** A stored suggestion as it applies to the editor's state now. */
export interface StoredMatch {
  entry: GhostTextParams;
  /**
   * What the user typed since the suggestion's request, '' for the very state it was made for.
   * The item shown covers these characters, so accepting replaces them instead of inserting
   * them a second time.
   */
  typed: string;
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

/**
 * The characters typed since `origin` (a suggestion's request state), or undefined when the
 * editor did anything else since. Typing n characters at the cursor makes n edits (VS Code bumps
 * the version once per edit, an auto-closed bracket included), so the editor must be on the same
 * line, exactly as many characters and versions further on, and the typed text must be the start
 * of the suggestion with something left to show. Anything else (a deletion, an edit elsewhere, a
 * paste) fails one of these, and the suggestion is not trusted any more.
 */
export function typedSince(origin: GhostTextParams, current: EditorState): string | undefined {
  if (origin.uri !== current.uri || origin.position.line !== current.position.line) return undefined;
  if (current.lineText === undefined) return undefined;
  const count = current.position.character - origin.position.character;
  if (count <= 0 || current.version - origin.version !== count) return undefined;
  const typed = current.lineText.slice(origin.position.character, current.position.character);
  if (typed.length !== count || !origin.insertText.startsWith(typed) || origin.insertText.length <= count) {
    return undefined;
  }
  return typed;
}

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
  private readonly listeners = new Set<() => void>();
  /** Per document: the state at which the user dismissed the suggestion (Escape). */
  private readonly dismissed = new Map<string, string>();

  /**
   * Records a notification, given the state of the editor showing its document (undefined when no
   * focused editor shows it, or it has several or non-empty selections). With `typedThrough`, a
   * notification for a state a few typed characters back is kept too (see typedSince).
   */
  record(update: GhostTextParams, current: EditorState | undefined, typedThrough = false): GhostTextDecision {
    if (current === undefined) return 'stale';
    // Growth that arrives after the user typed on into it still shows, over the typed text; the
    // caller says whether that is wanted (not while a request for the new state is in flight).
    const exact = sameState(update, current);
    if (!exact && (!typedThrough || typedSince(update, current) === undefined)) return 'stale';
    const dismissedAt = this.dismissed.get(update.uri);
    if (dismissedAt === stateKey(update) || dismissedAt === stateKey(current)) return 'stale';
    const previous = this.latest.get(update.uri);
    // A late notification of an older request never replaces a newer one's text.
    if (!exact && previous !== undefined && previous.version > update.version) return 'stale';
    this.latest.set(update.uri, update);
    this.changed();
    if (previous !== undefined && sameState(previous, update) && previous.insertText === update.insertText) {
      return 'unchanged';
    }
    return 'show';
  }

  /** Calls `listener` after every change; returns the function that removes it. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** The stored suggestion for exactly this state, if any (and not dismissed). */
  lookup(state: EditorState): GhostTextParams | undefined {
    const entry = this.latest.get(state.uri);
    if (entry === undefined || !sameState(entry, state)) return undefined;
    if (this.dismissed.get(state.uri) === stateKey(state)) return undefined;
    return entry;
  }

  /**
   * The stored suggestion for this state, or for one a few typed characters ago whose text the
   * user is typing through (not dismissed at either).
   */
  match(state: EditorState): StoredMatch | undefined {
    const entry = this.latest.get(state.uri);
    if (entry === undefined) return undefined;
    const dismissedAt = this.dismissed.get(state.uri);
    if (dismissedAt === stateKey(state) || dismissedAt === stateKey(entry)) return undefined;
    if (sameState(entry, state)) return { entry, typed: '' };
    const typed = typedSince(entry, state);
    return typed === undefined ? undefined : { entry, typed };
  }

  /** The user hid the suggestion here: later growth for this state must not bring it back. */
  dismiss(state: EditorState): void {
    this.dismissed.set(state.uri, stateKey(state));
    this.latest.delete(state.uri);
    this.changed();
  }

  forgetDocument(uri: string): void {
    this.latest.delete(uri);
    this.dismissed.delete(uri);
    this.changed();
  }

  clear(): void {
    this.latest.clear();
    this.dismissed.clear();
    this.changed();
  }

  get size(): number {
    return this.latest.size;
  }
}

/** What whenDone needs of a cancellation token (VS Code's fits). */
export interface Cancellation {
  isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

/**
 * The stored suggestion for `state` once its generation is done, for the one re-query VS Code
 * allows per state (see GhostTextSync). Resolves early with what is there when `timeoutMs`
 * passes, with undefined when the suggestion goes away (dismissed, replaced by a newer
 * state's) or the token is cancelled (the user typed on).
 */
export function whenDone(
  store: GhostTextStore,
  state: EditorState,
  token: Cancellation,
  timeoutMs: number,
): Promise<StoredMatch | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const cleanups: (() => void)[] = [];
    const finish = (result: StoredMatch | undefined): void => {
      if (settled) return;
      settled = true;
      for (const cleanup of cleanups) cleanup();
      resolve(result);
    };
    const check = (): void => {
      if (token.isCancellationRequested) return finish(undefined);
      const match = store.match(state);
      if (match === undefined || match.entry.done) finish(match);
    };
    cleanups.push(store.onChange(check));
    const subscription = token.onCancellationRequested(() => finish(undefined));
    cleanups.push(() => subscription.dispose());
    const timer = setTimeout(() => finish(store.match(state)), timeoutMs);
    cleanups.push(() => clearTimeout(timer));
    check();
  });
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
