// VS Code's inline suggestion provider, forwarding to the server's textDocument/inlineCompletion.
// VS Code's cancellation token is handed to sendRequest, so a suggestion VS Code no longer wants
// becomes `$/cancelRequest` and the server stops generating it.

import * as vscode from 'vscode';
import { InlineCompletionRequest, type LanguageClient, LSPErrorCodes, ResponseError } from 'vscode-languageclient/node';
import { preferGrownText } from './ghostText';
import { editorStateOf, type GhostTextSync } from './ghostTextSync';
import { inlineCompletionParams, type Suggestion, suggestionsFromResult } from './inlineResult';
import { SECTION } from './settings';

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
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async provideInlineCompletionItems(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | undefined> {
    // Language-overridable, so `"[markdown]": {"ghostfim.enable": false}` works client-side.
    if (!vscode.workspace.getConfiguration(SECTION, document).get<boolean>('enable', true)) return undefined;
    const client = this.getClient();
    // sendRequest would start a stopped client; a server that is down stays down until restarted.
    if (client === undefined || !client.isRunning()) return undefined;

    const state = editorStateOf(client, document, position);
    // A re-query caused by a ghostText notification: answer from the grown text. Sending a request
    // here would supersede the request whose generation is still growing.
    const selected = context.selectedCompletionInfo;
    if (selected === undefined) {
      const stored = this.ghostText.store.lookup(state);
      if (stored !== undefined) {
        return stored.insertText === '' ? undefined : [this.toItem({ text: stored.insertText, isSnippet: false }, position)];
      }
    }

    const params = inlineCompletionParams(
      state.uri,
      state.position,
      context.triggerKind,
      selected === undefined ? undefined : { range: client.code2ProtocolConverter.asRange(selected.range), text: selected.text },
    );
    let result: unknown;
    try {
      // By method name: languageclient's typed request carries the 3.17 proposal's trigger kinds.
      result = await client.sendRequest<unknown>(InlineCompletionRequest.method, params, token);
    } catch (error) {
      if (!token.isCancellationRequested && !isCancellation(error)) {
        this.log.warn(`textDocument/inlineCompletion failed: ${String(error)}`);
      }
      return undefined;
    }
    if (token.isCancellationRequested) return undefined;

    const suggestions = suggestionsFromResult(result);
    if (suggestions.length === 0) return undefined;
    // Growth may already have arrived for this very state while the answer was on its way.
    const grown = selected === undefined ? this.ghostText.store.lookup(state) : undefined;
    return suggestions.map((suggestion, index) =>
      this.toItem(
        index === 0 && !suggestion.isSnippet ? { ...suggestion, text: preferGrownText(suggestion.text, grown) } : suggestion,
        position,
      ),
    );
  }

  private toItem(suggestion: Suggestion, position: vscode.Position): vscode.InlineCompletionItem {
    const insertText = suggestion.isSnippet ? new vscode.SnippetString(suggestion.text) : suggestion.text;
    const range =
      suggestion.range !== undefined
        ? new vscode.Range(
            suggestion.range.start.line,
            suggestion.range.start.character,
            suggestion.range.end.line,
            suggestion.range.end.character,
          )
        : new vscode.Range(position, position);
    const item = new vscode.InlineCompletionItem(insertText, range);
    if (suggestion.filterText !== undefined) item.filterText = suggestion.filterText;
    return item;
  }
}
