// VS Code's inline suggestion provider, forwarding to the server's textDocument/inlineCompletion.
// VS Code's cancellation token is handed to sendRequest, so a suggestion VS Code no longer wants
// becomes `$/cancelRequest` and the server stops generating it. Every item keeps the server's
// accept command (VS Code runs it after a full accept), also when it is answered from the ghost
// text store, and is reported shown (acceptSignals.ts).

import * as vscode from 'vscode';
import { InlineCompletionRequest, type LanguageClient, LSPErrorCodes, ResponseError } from 'vscode-languageclient/node';
import type { AcceptSignals } from './acceptSignals';
import { storedCommand } from './acceptance';
import { enabledFor } from './client';
import { preferGrownText, whenDone } from './ghostText';
import { editorStateOf, type GhostTextSync, REQUERY_WAIT_MS } from './ghostTextSync';
import { inlineCompletionParams, placeSuggestion, type Suggestion, suggestionsFromResult } from './inlineResult';

function isCancellation(error: unknown): boolean {
  return (
    error instanceof ResponseError &&
    (error.code === LSPErrorCodes.RequestCancelled || error.code === LSPErrorCodes.ServerCancelled)
  );
}

export class InlineProvider implements vscode.InlineCompletionItemProvider {
  constructor(
    private readonly getClient: () => LanguageClient | undefined,
    private readonly ghostText: GhostTextSync,
    private readonly signals: AcceptSignals,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async provideInlineCompletionItems(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | undefined> {
    // The per-language gate lives here, the server knows no languages: it is told `enable: true`
    // while any language is on (serverEnable in settings.ts), and this decides per document.
    if (!enabledFor(document)) return undefined;
    const client = this.getClient();
    // sendRequest would start a stopped client; a server that is down stays down until restarted.
    if (client === undefined || !client.isRunning()) return undefined;

    const state = editorStateOf(client, document, position);
    const lineText = state.lineText ?? '';
    // A re-query caused by a ghostText notification: answer from the grown text. Sending a request
    // here would supersede the request whose generation is still growing. Automatic requests use
    // the stored text only for the very state it was made for; our own re-query (an explicit
    // trigger) also for a state the user typed on to, shown over the typed characters.
    const selected = context.selectedCompletionInfo;
    const requery = context.triggerKind === vscode.InlineCompletionTriggerKind.Invoke && this.ghostText.isRequeryOf(state);
    if (selected === undefined) {
      let stored = this.ghostText.store.match(state);
      if (stored !== undefined && requery) {
        // The one re-query VS Code makes of this state: answer with the whole suggestion.
        stored = await whenDone(this.ghostText.store, state, token, REQUERY_WAIT_MS);
        if (token.isCancellationRequested) return undefined;
      }
      if (stored !== undefined && (stored.typed === '' || requery)) {
        if (stored.entry.insertText === '') return undefined;
        // The stored text is the grown answer to the request made at the entry's state: the
        // item the notification names, or else the one that answer carried.
        const command = storedCommand(stored.entry, this.signals.tracker.commandFor(state.uri, stored.entry));
        const item = this.toItem(
          {
            text: stored.entry.insertText,
            isSnippet: false,
            range: { start: stored.entry.position, end: stored.entry.position },
            ...(command !== undefined ? { command } : {}),
          },
          position,
          position,
          lineText,
          state.uri,
        );
        if (item === undefined) return undefined;
        if (requery) this.ghostText.noteRequeryAnswered(state);
        return [item];
      }
    }
    // Our re-query found its suggestion gone (dismissed, replaced): nothing to show.
    if (requery) return undefined;

    const params = inlineCompletionParams(
      state.uri,
      state.position,
      context.triggerKind,
      selected === undefined ? undefined : { range: client.code2ProtocolConverter.asRange(selected.range), text: selected.text },
    );
    let result: unknown;
    try {
      // By method name: languageclient's typed request carries the 3.17 proposal's trigger kinds.
      result = await this.ghostText.whileInFlight(state.uri, () =>
        client.sendRequest<unknown>(InlineCompletionRequest.method, params, token),
      );
    } catch (error) {
      if (!token.isCancellationRequested && !isCancellation(error)) {
        this.log.warn(`textDocument/inlineCompletion failed: ${String(error)}`);
      }
      return undefined;
    }
    if (token.isCancellationRequested) return undefined;

    const suggestions = suggestionsFromResult(result);
    if (suggestions.length === 0) return undefined;
    const answered = suggestions[0]?.command;
    if (answered !== undefined) this.signals.tracker.rememberAnswer(state.uri, state, answered);
    // Growth may already have arrived for this very state while the answer was on its way.
    const grown = selected === undefined ? this.ghostText.store.lookup(state) : undefined;
    // VS Code drops answers for an older document version itself; the items are still placed
    // against the line as it is now, so a typed character is covered, never inserted twice.
    const current = position.line < document.lineCount ? document.lineAt(position.line).text : lineText;
    const items: vscode.InlineCompletionItem[] = [];
    suggestions.forEach((suggestion, index) => {
      const shown =
        index === 0 && !suggestion.isSnippet ? { ...suggestion, text: preferGrownText(suggestion.text, grown) } : suggestion;
      // Only the first item is tracked for the signals: the one VS Code shows unless the user
      // cycles (Alt+]), and ghostfim sends one.
      const tracked = index === 0 ? state.uri : undefined;
      const item = this.toItem(shown, position, this.cursorIn(document) ?? position, current, tracked);
      if (item !== undefined) items.push(item);
    });
    if (items.length === 0) return undefined;
    this.ghostText.noteAnswered(state);
    return items;
  }

  /** The focused editor's cursor in this document, if it has a single empty selection. */
  private cursorIn(document: vscode.TextDocument): vscode.Position | undefined {
    const editor = vscode.window.activeTextEditor;
    if (editor?.document !== document || editor.selections.length !== 1 || !editor.selection.isEmpty) return undefined;
    return editor.selection.active;
  }

  /**
   * `requested`: the position the suggestion was asked for; `cursor`: where the cursor is now.
   * With `trackedUri`, the item is the one the accept signals act on for that document.
   */
  private toItem(
    suggestion: Suggestion,
    requested: vscode.Position,
    cursor: vscode.Position,
    lineText: string,
    trackedUri?: string,
  ): vscode.InlineCompletionItem | undefined {
    const at = { line: requested.line, character: requested.character };
    const range = suggestion.range ?? { start: at, end: at };
    // Snippets are placed as the server says: their text is not what ends up in the document.
    const placed = suggestion.isSnippet
      ? { text: suggestion.text, range }
      : placeSuggestion(suggestion.text, range, { line: cursor.line, character: cursor.character }, lineText);
    if (placed === undefined) return undefined;
    const insertText = suggestion.isSnippet ? new vscode.SnippetString(placed.text) : placed.text;
    const { start, end } = placed.range;
    const item = new vscode.InlineCompletionItem(insertText, new vscode.Range(start.line, start.character, end.line, end.character));
    if (suggestion.filterText !== undefined) item.filterText = suggestion.filterText;
    const command = suggestion.command;
    if (command !== undefined) {
      // VS Code runs it after a full accept (never after a partial one): languageclient registered
      // the server's commands, so this becomes workspace/executeCommand.
      item.command = { title: command.title, command: command.command, arguments: command.arguments };
      // A snippet's text is not what lands in the document: no partial accepts to measure.
      if (trackedUri !== undefined && !suggestion.isSnippet) {
        this.signals.provided(trackedUri, { insertText: placed.text, start: { ...start }, command });
      }
    }
    return item;
  }
}
