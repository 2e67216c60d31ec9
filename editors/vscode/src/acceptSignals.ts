// Sends the accept signals VS Code's stable API has no hook for (docs/protocol.md, "Accept
// signals"): an item shown (when the provider hands it to VS Code), a word or a line of it accepted
// (our own accept-word and accept-line commands run VS Code's and then report what was taken), and
// a dismiss (Escape, our ghostfim.dismiss). A full accept needs nothing here: VS Code runs the
// item's command, `ghostfim.accepted`, which languageclient registered from the server's
// executeCommandProvider and sends as workspace/executeCommand. That registration is
// languageclient's, so this extension never registers that command itself (a second registration
// of one id is an error, and it would break the client's start).

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import {
  AcceptTracker,
  itemIdOf,
  partialAcceptLength,
  type ShownItem,
  SignalMethods,
  stillApplies,
  wireItem,
} from './acceptance';
import { protocolUri } from './ghostTextSync';

export const ACCEPT_NEXT_WORD = 'editor.action.inlineSuggest.acceptNextWord';
export const ACCEPT_NEXT_LINE = 'editor.action.inlineSuggest.acceptNextLine';

export class AcceptSignals implements vscode.Disposable {
  readonly tracker = new AcceptTracker();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly getClient: () => LanguageClient | undefined,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      vscode.workspace.onDidCloseTextDocument((document) =>
        this.tracker.forgetDocument(protocolUri(this.getClient(), document.uri)),
      ),
    );
  }

  /** The provider is handing `item` to VS Code: it goes on screen now (once per item). */
  provided(uri: string, item: ShownItem): void {
    if (this.tracker.provided(uri, item)) this.notify(SignalMethods.didShow, item);
  }

  /** languageclient is about to send the accept command: that item is done. */
  commandRan(args: unknown[]): void {
    const id = typeof args[0] === 'string' ? args[0] : undefined;
    if (id !== undefined) this.tracker.acceptedId(id);
  }

  /**
   * Accepts the next word or line (VS Code's own command) and reports the part of the item now in
   * the document. The item is read before the command runs: the edit makes VS Code ask the
   * provider again, and its next answer is another item.
   */
  async acceptNext(kind: 'word' | 'line'): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const uri = editor === undefined ? undefined : protocolUri(this.getClient(), editor.document.uri);
    const item = uri === undefined ? undefined : this.tracker.currentFor(uri);
    const version = editor?.document.version;
    await vscode.commands.executeCommand(kind === 'word' ? ACCEPT_NEXT_WORD : ACCEPT_NEXT_LINE);
    if (editor === undefined || uri === undefined || item === undefined) return;
    if (editor.document.version === version) return; // nothing was accepted
    const taken = this.textFromStart(editor, item);
    const acceptedLength = taken === undefined ? undefined : partialAcceptLength(item, taken);
    // The whole rest taken: VS Code made it a full accept and ran the item's command.
    if (acceptedLength === undefined) return;
    this.notify(SignalMethods.didPartiallyAccept, item, { acceptedLength });
  }

  /** Escape hid the suggestion: tell the server, if the item it showed is still the one here. */
  dismissed(): void {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined) return;
    const uri = protocolUri(this.getClient(), editor.document.uri);
    const item = this.tracker.currentFor(uri);
    if (item === undefined) return;
    this.tracker.finished(uri, item);
    const typed = this.textFromStart(editor, item);
    if (typed === undefined || !stillApplies(item, typed)) return;
    this.notify(SignalMethods.didDismiss, item);
  }

  /** A new server process: the old one's items are unknown to it. */
  reset(): void {
    this.tracker.clear();
  }

  /** The document's text from the item's start to the cursor (line breaks as "\n"). */
  private textFromStart(editor: vscode.TextEditor, item: ShownItem): string | undefined {
    const start = new vscode.Position(item.start.line, item.start.character);
    const cursor = editor.selection.active;
    if (editor.selections.length !== 1 || cursor.isBefore(start)) return undefined;
    return editor.document.getText(new vscode.Range(start, cursor)).replace(/\r\n/g, '\n');
  }

  private notify(method: string, item: ShownItem, extra: Record<string, unknown> = {}): void {
    const client = this.getClient();
    if (client === undefined || !client.isRunning()) return;
    this.log.trace(`${method} ${itemIdOf(item.command) ?? '(no id)'}`);
    // Best effort: a server without these notifications still serves (the protocol calls them optional).
    client.sendNotification(method, { item: wireItem(item), ...extra }).catch((error: unknown) => {
      this.log.debug(`${method} failed: ${String(error)}`);
    });
  }

  dispose(): void {
    for (const disposable of this.disposables) disposable.dispose();
  }
}
