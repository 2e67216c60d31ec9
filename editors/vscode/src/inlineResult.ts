// Translating between VS Code's inline completion API and LSP's textDocument/inlineCompletion.
// Pure data in and out, so it is unit-tested; inlineProvider.ts builds the vscode objects.
// The server speaks LSP 3.18, where InlineCompletionTriggerKind is Invoked = 1, Automatic = 2.
// languageclient 9 ships the earlier 3.17 proposal (0 and 1, VS Code's own numbering) and passes
// VS Code's value through, so this extension builds the params itself. No `vscode` import.

import { commandOf, type ServerCommand } from './acceptance';
import { isPosition, isRecord, type Position } from './protocol';

/** VS Code's InlineCompletionTriggerKind values. */
export const VsTriggerKind = { Invoke: 0, Automatic: 1 } as const;
/** LSP's InlineCompletionTriggerKind values. */
export const LspTriggerKind = { Invoked: 1, Automatic: 2 } as const;

export type LspTriggerKindValue = (typeof LspTriggerKind)[keyof typeof LspTriggerKind];

/**
 * Explicit requests (Alt+\, or our own re-query) are not debounced by the server and get the full
 * prompt; everything else is a keystroke. Unknown future kinds count as automatic, the cheap one.
 */
export function toLspTriggerKind(vscodeKind: number): LspTriggerKindValue {
  return vscodeKind === VsTriggerKind.Invoke ? LspTriggerKind.Invoked : LspTriggerKind.Automatic;
}

export interface Range {
  start: Position;
  end: Position;
}

/** textDocument/inlineCompletion params as LSP 3.18 defines them. */
export interface InlineCompletionParams {
  textDocument: { uri: string };
  position: Position;
  context: {
    triggerKind: LspTriggerKindValue;
    /** The completion item selected in the suggest widget, which the suggestion must extend. */
    selectedCompletionInfo?: { range: Range; text: string };
  };
}

export function inlineCompletionParams(
  uri: string,
  position: Position,
  vscodeTriggerKind: number,
  selected?: { range: Range; text: string },
): InlineCompletionParams {
  const params: InlineCompletionParams = {
    textDocument: { uri },
    position: { line: position.line, character: position.character },
    context: { triggerKind: toLspTriggerKind(vscodeTriggerKind) },
  };
  if (selected !== undefined) params.context.selectedCompletionInfo = selected;
  return params;
}

export interface Suggestion {
  text: string;
  /** The server promises plain text; a snippet is still honoured if one ever arrives. */
  isSnippet: boolean;
  range?: Range;
  filterText?: string;
  /** The server's accept command (ghostfim.accepted with the item's id), run after a full accept. */
  command?: ServerCommand;
}

function asRange(value: unknown): Range | undefined {
  if (isRecord(value) && isPosition(value.start) && isPosition(value.end)) {
    return { start: { ...value.start }, end: { ...value.end } };
  }
  return undefined;
}

function asSuggestion(item: unknown): Suggestion | undefined {
  if (!isRecord(item)) return undefined;
  let text: string;
  let isSnippet = false;
  if (typeof item.insertText === 'string') {
    text = item.insertText;
  } else if (isRecord(item.insertText) && typeof item.insertText.value === 'string') {
    text = item.insertText.value;
    isSnippet = item.insertText.kind === 'snippet';
  } else {
    return undefined;
  }
  if (text === '') return undefined;
  const suggestion: Suggestion = { text, isSnippet };
  const range = asRange(item.range);
  if (range !== undefined) suggestion.range = range;
  if (typeof item.filterText === 'string') suggestion.filterText = item.filterText;
  const command = commandOf(item);
  if (command !== undefined) suggestion.command = command;
  return suggestion;
}

/** Accepts an InlineCompletionList, a bare item array, or null. Empty items are dropped. */
export function suggestionsFromResult(result: unknown): Suggestion[] {
  const items = Array.isArray(result) ? result : isRecord(result) && Array.isArray(result.items) ? result.items : [];
  return items.map(asSuggestion).filter((s): s is Suggestion => s !== undefined);
}

/** An item ready for VS Code: the text and the range it replaces. */
export interface PlacedSuggestion {
  text: string;
  range: Range;
}

/**
 * Where a suggestion goes so that accepting it never doubles what the user typed. The server
 * gives each item an empty `range` at the position its request was made for; when the cursor is
 * further on along that line (characters typed since the request, or a stored suggestion being
 * typed through), the item is widened to cover [request position, cursor] and keeps its whole
 * text, so accepting replaces the typed characters instead of inserting them a second time (the
 * bug peers' users report: copilot.lua #259, Neovim #36529). `lineText` is the cursor's line as
 * it is now. A suggestion the typed text does not start, or that it used up, is dropped. A
 * non-empty range from the server is its own decision and is passed through.
 */
export function placeSuggestion(text: string, range: Range, cursor: Position, lineText: string): PlacedSuggestion | undefined {
  const origin = range.start;
  const end = range.end;
  if (origin.line !== end.line || origin.character !== end.character) {
    return { text, range: { start: { ...origin }, end: { ...end } } };
  }
  if (cursor.line !== origin.line || cursor.character < origin.character) return undefined;
  const typed = lineText.slice(origin.character, cursor.character);
  if (typed.length !== cursor.character - origin.character) return undefined;
  if (!text.startsWith(typed) || (typed !== '' && text.length <= typed.length)) return undefined;
  return { text, range: { start: { ...origin }, end: { line: cursor.line, character: cursor.character } } };
}
