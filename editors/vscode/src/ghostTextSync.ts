// Wires `ghostfim/ghostText` notifications to VS Code: a notification for the focused editor's
// exact state is stored (ghostText.ts) and VS Code is asked to re-query inline suggestions, which
// inlineProvider.ts answers from the store. Also handles Escape, so growth does not bring back a
// suggestion the user dismissed.

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { CoalescingRunner, type EditorState, GhostTextStore } from './ghostText';
import { isGhostTextParams } from './protocol';

export const TRIGGER_INLINE_SUGGEST = 'editor.action.inlineSuggest.trigger';
export const HIDE_INLINE_SUGGEST = 'editor.action.inlineSuggest.hide';

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

export class GhostTextSync implements vscode.Disposable {
  readonly store = new GhostTextStore();
  private readonly retrigger: CoalescingRunner;
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
        await vscode.commands.executeCommand(TRIGGER_INLINE_SUGGEST);
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
