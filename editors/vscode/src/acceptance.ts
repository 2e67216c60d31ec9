// Accept signals (docs/protocol.md, "Accept signals"): which server item VS Code shows, and what
// to tell the server when it is shown, partly accepted or dismissed. VS Code's stable API only runs
// an item's `command` after a full accept (that reaches the server through languageclient's
// registration of the commands the server lists); the rest is reported by acceptSignals.ts from
// what this module tracks. No `vscode` import: unit-tested.

import { isRecord, type Position } from './protocol';

/** The command every server item carries; run after a full accept, it names the item's id. */
export const ACCEPTED_COMMAND = 'ghostfim.accepted';

/** The notifications our clients send besides the command (the shapes Copilot's server uses). */
export const SignalMethods = {
  didShow: 'textDocument/didShowCompletion',
  didPartiallyAccept: 'textDocument/didPartiallyAcceptCompletion',
  didDismiss: 'ghostfim/didDismissCompletion',
} as const;

/** An LSP `Command`, as the server put it on an item. */
export interface ServerCommand {
  title: string;
  command: string;
  arguments?: unknown[];
}

/** The item's `command`, when it is a well-formed LSP Command. */
export function commandOf(item: unknown): ServerCommand | undefined {
  if (!isRecord(item) || !isRecord(item.command)) return undefined;
  const { title, command } = item.command;
  const args: unknown = item.command.arguments;
  if (typeof command !== 'string' || command === '') return undefined;
  if (args !== undefined && !Array.isArray(args)) return undefined;
  const result: ServerCommand = { title: typeof title === 'string' ? title : command, command };
  if (Array.isArray(args)) result.arguments = (args as unknown[]).slice();
  return result;
}

/**
 * The command of an item the provider answers from the ghost text store: the one the server
 * sent with the text (`ghostfim/ghostText` names the item it shows), else the one the answer to
 * that text's request carried. The notification's is the one to trust: a request the editor
 * cancelled before its answer still streams text that goes on screen, and no answer names it.
 */
export function storedCommand(entry: unknown, answered: ServerCommand | undefined): ServerCommand | undefined {
  return commandOf(entry) ?? answered;
}

/** The item id the server put in its accept command (its first argument), if any. */
export function itemIdOf(command: ServerCommand | undefined): string | undefined {
  const first = command?.arguments?.[0];
  return typeof first === 'string' && first !== '' ? first : undefined;
}

/**
 * An item as VS Code shows it: the server's command, the whole text from where it starts (the
 * text grows while the suggestion streams), and where it starts. This is the `item` the signals
 * send: the server reads the id from `command` and measures `acceptedLength` against
 * `insertText`, so both must be what is on screen.
 */
export interface ShownItem {
  insertText: string;
  start: Position;
  command: ServerCommand;
}

/** The `item` of a signal's params. */
export function wireItem(item: ShownItem): Record<string, unknown> {
  const at = { line: item.start.line, character: item.start.character };
  return { insertText: item.insertText, range: { start: at, end: { ...at } }, command: item.command };
}

/**
 * `acceptedLength` after a partial accept: the UTF-16 code units of the item's text that are now
 * in the document between its start and the cursor (`taken`, line breaks as "\n"). JavaScript
 * strings are UTF-16, so that is `taken.length`. What was typed over the item before counts too,
 * as VS Code's own partial-accept event counts it. Undefined when `taken` is not the start of the
 * text (the item is not what was accepted), is empty, or is all of it: VS Code turns a partial
 * accept that takes the rest into a full one, and runs the item's command itself.
 */
export function partialAcceptLength(item: ShownItem, taken: string): number | undefined {
  if (taken === '' || taken.length >= item.insertText.length || !item.insertText.startsWith(taken)) return undefined;
  return taken.length;
}

/** Whether the item can still be on screen with `typed` (the text from its start to the cursor). */
export function stillApplies(item: ShownItem, typed: string): boolean {
  return typed.length < item.insertText.length && item.insertText.startsWith(typed);
}

/** Where and when a request was made: the key its answer's command is remembered under. */
export interface RequestState {
  version: number;
  position: Position;
}

export function requestKey(state: RequestState): string {
  return `${state.version}:${state.position.line}:${state.position.character}`;
}

const ANSWERS_PER_DOCUMENT = 8;
const SHOWN_IDS_KEPT = 256;

/**
 * What the signals need to know, per document: the command of each recent server answer, by the
 * state its request was made in (an answer the provider later gives from the ghost text store,
 * grown, is still that item), and the item the provider last gave VS Code (the one a word or line
 * accept, or Escape, acts on).
 */
export class AcceptTracker {
  private readonly answers = new Map<string, Map<string, ServerCommand>>();
  private readonly current = new Map<string, ShownItem>();
  private readonly shownIds = new Set<string>();

  /** The server answered the request made in `state` with an item carrying `command`. */
  rememberAnswer(uri: string, state: RequestState, command: ServerCommand): void {
    let answers = this.answers.get(uri);
    if (answers === undefined) {
      answers = new Map();
      this.answers.set(uri, answers);
    }
    const key = requestKey(state);
    answers.delete(key); // re-inserted as the newest
    answers.set(key, command);
    while (answers.size > ANSWERS_PER_DOCUMENT) {
      const oldest = answers.keys().next().value;
      if (oldest === undefined) break;
      answers.delete(oldest);
    }
  }

  /** The command of the answer to the request made in `state`, if it is still remembered. */
  commandFor(uri: string, state: RequestState): ServerCommand | undefined {
    return this.answers.get(uri)?.get(requestKey(state));
  }

  /**
   * The provider gave VS Code this item for the document. Returns true the first time an item id
   * is given (the moment to send didShowCompletion: once per item, not once per growth).
   */
  provided(uri: string, item: ShownItem): boolean {
    this.current.set(uri, item);
    const id = itemIdOf(item.command);
    if (id === undefined || this.shownIds.has(id)) return false;
    this.shownIds.add(id);
    if (this.shownIds.size > SHOWN_IDS_KEPT) {
      const oldest = this.shownIds.values().next().value;
      if (oldest !== undefined) this.shownIds.delete(oldest);
    }
    return true;
  }

  /** The item last given to VS Code for the document. */
  currentFor(uri: string): ShownItem | undefined {
    return this.current.get(uri);
  }

  /** The item is gone from the screen (accepted in full, dismissed): nothing acts on it now. */
  finished(uri: string, item: ShownItem): void {
    if (this.current.get(uri) === item) this.current.delete(uri);
  }

  /** A full accept ran the command with this id: whichever document showed it, it is done. */
  acceptedId(id: string): void {
    for (const [uri, item] of this.current) {
      if (itemIdOf(item.command) === id) this.current.delete(uri);
    }
  }

  forgetDocument(uri: string): void {
    this.answers.delete(uri);
    this.current.delete(uri);
  }

  /** A new server process: the old one's item ids mean nothing to it. */
  clear(): void {
    this.answers.clear();
    this.current.clear();
    this.shownIds.clear();
  }
}
