// Wires `ghostfim/ghostText` notifications to VS Code: a notification for the focused editor's
// exact state is stored (ghostText.ts) and VS Code is asked to re-query inline suggestions, which
// inlineProvider.ts answers from the store (once per state, when the generation is done). Also
// handles Escape, so growth does not bring back a
// suggestion the user dismissed.

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { CoalescingRunner, type EditorState, GhostTextStore } from './ghostText';
import { isGhostTextParams } from './protocol';

export const TRIGGER_INLINE_SUGGEST = 'editor.action.inlineSuggest.trigger';
export const HIDE_INLINE_SUGGEST = 'editor.action.inlineSuggest.hide';
export const SHOW_NEXT_INLINE_SUGGEST = 'editor.action.inlineSuggest.showNext';
/** How long a re-query waits for a generation to finish before it shows what there is. */
export const REQUERY_WAIT_MS = 15_000;

/** The URI string the server knows a document by: the one languageclient synced it under. */
export function protocolUri(client: LanguageClient | undefined, uri: vscode.Uri): string {
  return client !== undefined ? client.code2ProtocolConverter.asUri(uri) : uri.toString();
}

export function editorStateOf(
  client: LanguageClient | undefined,
  document: vscode.TextDocument,
  position: vscode.Position,
): EditorState {
  return {
    uri: protocolUri(client, document.uri),
    version: document.version,
    position: { line: position.line, character: position.character },
    lineText: position.line < document.lineCount ? document.lineAt(position.line).text : undefined,
  };
}

/** How long VS Code is given to show an early answer before its state is re-queried. */
const SHOW_SETTLE_MS = 150;

function keyOf(state: EditorState): string {
  return `${state.uri}@${state.version}:${state.position.line}:${state.position.character}`;
}

export class GhostTextSync implements vscode.Disposable {
  readonly store = new GhostTextStore();
  private readonly retrigger: CoalescingRunner;
  /** The state our re-query is running for: its explicit provider call is answered from the store. */
  private requeryKey: string | undefined;
  /** Whether the provider answered the running re-query with a suggestion. */
  private requeryAnswered = false;
  /** The state last re-queried (VS Code re-queries a state once). */
  private requeried: string | undefined;
  /** When the provider last returned a server answer, per state (one entry per document). */
  private readonly answered = new Map<string, number>();
  /** Requests the provider is waiting for, per document URI. */
  private readonly inFlight = new Map<string, number>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly getClient: () => LanguageClient | undefined,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.retrigger = new CoalescingRunner(
      async () => {
        // The editor may have moved on since the notification was stored.
        const state = this.focusedState();
        if (state === undefined || this.store.match(state) === undefined) return;
        // VS Code (1.139) re-queries a position and version once: a later trigger there is
        // answered with what its explicit request got (that request "satisfies" the new one);
        // only hiding the suggestion first gets past that, which flickers and lets a Tab pressed
        // in the gap indent instead of accepting. So each state is re-queried once, the provider
        // holds that answer until the generation is done (whenDone) while VS Code keeps showing
        // the early answer, and the grown suggestion then takes its place: it grows from its
        // first characters to the whole, without flicker.
        const key = keyOf(state);
        if (key === this.requeried) return;
        // VS Code must have shown the early answer first: a trigger while it still processes that
        // answer drops it, and nothing would show until the generation is done. Notifications can
        // even arrive before the answer; noteAnswered asks again then.
        const answeredAt = this.answered.get(key);
        if (answeredAt === undefined) return;
        const settle = answeredAt + SHOW_SETTLE_MS - Date.now();
        if (settle > 0) {
          await new Promise((resolve) => setTimeout(resolve, settle));
          const now = this.focusedState();
          if (now === undefined || keyOf(now) !== key || this.store.match(now) === undefined) return;
        }
        this.requeried = key;
        this.requeryKey = key;
        this.requeryAnswered = false;
        try {
          await vscode.commands.executeCommand(TRIGGER_INLINE_SUGGEST);
        } finally {
          this.requeryKey = undefined;
        }
        // An explicit trigger keeps the suggestion on screen and lists the new one after it
        // (VS Code "preserves the current completion"): select the grown one, which replaces the
        // early one in place, as Alt+] would.
        const now = this.focusedState();
        if (this.requeryAnswered && now !== undefined && keyOf(now) === key) {
          await vscode.commands.executeCommand(SHOW_NEXT_INLINE_SUGGEST);
        }
      },
      (error) => this.log.warn(`Re-querying inline suggestions failed: ${String(error)}`),
    );
    this.disposables.push(
      vscode.workspace.onDidCloseTextDocument((document) =>
        this.store.forgetDocument(protocolUri(this.getClient(), document.uri)),
      ),
    );
  }

  /** The focused editor's state, if it has a single cursor and no selection. */
  focusedState(): EditorState | undefined {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined || editor.selections.length !== 1 || !editor.selection.isEmpty) return undefined;
    return editorStateOf(this.getClient(), editor.document, editor.selection.active);
  }

  /** Handler for `ghostfim/ghostText`. */
  handleNotification(params: unknown): void {
    if (!isGhostTextParams(params)) {
      this.log.debug('Ignored a malformed ghostfim/ghostText notification.');
      return;
    }
    // Growth for a state the user has typed on from is shown over the typed characters, but not
    // while a request for the new state is on its way: re-querying would cancel that request, and
    // the server may be growing its answer (it supersedes the older request when a newer comes).
    const typedThrough = (this.inFlight.get(params.uri) ?? 0) === 0;
    if (this.store.record(params, this.focusedState(), typedThrough) === 'show') this.retrigger.request();
  }

  /** The provider answered our re-query of this state with the grown suggestion. */
  noteRequeryAnswered(state: EditorState): void {
    if (this.isRequeryOf(state)) this.requeryAnswered = true;
  }

  /** The provider returned a server answer for this state (VS Code is about to show it). */
  noteAnswered(state: EditorState): void {
    for (const key of this.answered.keys()) if (key.startsWith(`${state.uri}@`)) this.answered.delete(key);
    this.answered.set(keyOf(state), Date.now());
    // Growth that came before the answer is shown now.
    if (this.store.match(state) !== undefined) this.retrigger.request();
  }

  /**
   * Whether an explicit provider call is our re-query of this very state rather than the user's
   * Alt+\ (or our trigger landing after the user moved on): only then is it answered from the
   * store alone.
   */
  isRequeryOf(state: EditorState): boolean {
    return this.requeryKey !== undefined && this.requeryKey === keyOf(state);
  }

  /** Runs `request` counted as in flight for the document, for handleNotification. */
  async whileInFlight<T>(uri: string, request: () => Promise<T>): Promise<T> {
    this.inFlight.set(uri, (this.inFlight.get(uri) ?? 0) + 1);
    try {
      return await request();
    } finally {
      const left = (this.inFlight.get(uri) ?? 1) - 1;
      if (left > 0) this.inFlight.set(uri, left);
      else this.inFlight.delete(uri);
    }
  }

  /** Escape while ghost text is visible: hide it and keep it hidden while it grows. */
  async dismiss(): Promise<void> {
    const state = this.focusedState();
    if (state !== undefined) this.store.dismiss(state);
    await vscode.commands.executeCommand(HIDE_INLINE_SUGGEST);
  }

  /** A new server process knows nothing of the old one's suggestions. */
  reset(): void {
    this.store.clear();
  }

  dispose(): void {
    this.retrigger.dispose();
    for (const disposable of this.disposables) disposable.dispose();
  }
}
