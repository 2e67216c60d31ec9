import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ACCEPTED_COMMAND,
  AcceptTracker,
  commandOf,
  itemIdOf,
  partialAcceptLength,
  requestKey,
  type ServerCommand,
  type ShownItem,
  SignalMethods,
  stillApplies,
  storedCommand,
  wireItem,
} from '../src/acceptance';
import { suggestionsFromResult } from '../src/inlineResult';

// What lsp/server.py puts on every item (docs/protocol.md, "Accept signals").
const accepted = (id: string): ServerCommand => ({ title: 'ghostfim: accepted', command: ACCEPTED_COMMAND, arguments: [id] });

function shown(text: string, id = 'g1', line = 3, character = 4): ShownItem {
  return { insertText: text, start: { line, character }, command: accepted(id) };
}

describe('the method names', () => {
  it('are the ones the server handles', () => {
    assert.equal(ACCEPTED_COMMAND, 'ghostfim.accepted');
    assert.deepEqual(SignalMethods, {
      didShow: 'textDocument/didShowCompletion',
      didPartiallyAccept: 'textDocument/didPartiallyAcceptCompletion',
      didDismiss: 'ghostfim/didDismissCompletion',
    });
  });
});

describe('storedCommand', () => {
  const notification = (command?: unknown) => ({
    uri: 'file:///a.py',
    version: 3,
    position: { line: 1, character: 4 },
    insertText: 'rt(var',
    done: false,
    ...(command !== undefined ? { command } : {}),
  });

  it('takes the item the notification names over the remembered answer', () => {
    assert.deepEqual(storedCommand(notification(accepted('g9')), accepted('g2')), accepted('g9'));
  });

  it('falls back to the answer when the notification names none (an older server)', () => {
    assert.deepEqual(storedCommand(notification(), accepted('g2')), accepted('g2'));
    assert.deepEqual(storedCommand(notification({ command: 42 }), accepted('g2')), accepted('g2'));
  });

  it('carries a command for text whose request was cancelled before its answer', () => {
    // no answer was remembered: without the notification's command a Tab counts for nothing
    assert.deepEqual(storedCommand(notification(accepted('g5')), undefined), accepted('g5'));
    assert.equal(storedCommand(notification(), undefined), undefined);
  });
});

describe('commandOf', () => {
  it("keeps the server's command, arguments included", () => {
    const item = { insertText: 'x', command: accepted('g7') };
    assert.deepEqual(commandOf(item), accepted('g7'));
    assert.equal(itemIdOf(commandOf(item)), 'g7');
  });

  it('copies the arguments (the item is not shared with VS Code)', () => {
    const args = ['g7'];
    const command = commandOf({ insertText: 'x', command: { title: 't', command: ACCEPTED_COMMAND, arguments: args } });
    args[0] = 'changed';
    assert.equal(itemIdOf(command), 'g7');
  });

  it('drops malformed commands', () => {
    assert.equal(commandOf({ insertText: 'x' }), undefined);
    assert.equal(commandOf({ command: 'ghostfim.accepted' }), undefined);
    assert.equal(commandOf({ command: { title: 't' } }), undefined);
    assert.equal(commandOf({ command: { command: 'c', arguments: 'g1' } }), undefined);
    assert.deepEqual(commandOf({ command: { command: 'c' } }), { title: 'c', command: 'c' });
    assert.equal(itemIdOf({ title: 't', command: 'c', arguments: [42] }), undefined);
    assert.equal(itemIdOf(undefined), undefined);
  });

  it('reaches the provider through suggestionsFromResult', () => {
    const range = { start: { line: 3, character: 8 }, end: { line: 3, character: 8 } };
    const [suggestion] = suggestionsFromResult({ items: [{ insertText: 'return a + b', range, command: accepted('g3') }] });
    assert.deepEqual(suggestion?.command, accepted('g3'));
    assert.equal(suggestionsFromResult({ items: [{ insertText: 'x' }] })[0]?.command, undefined);
  });
});

describe('partialAcceptLength', () => {
  it('counts the UTF-16 code units of the item now in the document', () => {
    assert.equal(partialAcceptLength(shown('return a + b'), 'return'), 6);
    // The characters typed over the item before the accept are part of what it gave.
    assert.equal(partialAcceptLength(shown('return a + b'), 'return a'), 8);
    // An astral character is two UTF-16 code units; é is one.
    assert.equal(partialAcceptLength(shown('x = "😀é" + y'), 'x = "😀é"'), 9);
    assert.equal(partialAcceptLength(shown('a = 1\nb = 2'), 'a = 1\n'), 6);
  });

  it('says nothing for a partial accept that took it all (VS Code ran the command then)', () => {
    assert.equal(partialAcceptLength(shown('total'), 'total'), undefined);
  });

  it('says nothing for text that is not the start of the item, or none', () => {
    assert.equal(partialAcceptLength(shown('return a + b'), 'retry'), undefined);
    assert.equal(partialAcceptLength(shown('return a + b'), ''), undefined);
  });
});

describe('stillApplies', () => {
  it('holds while what precedes the cursor is the start of the item', () => {
    assert.ok(stillApplies(shown('return a'), ''));
    assert.ok(stillApplies(shown('return a'), 'ret'));
    assert.ok(!stillApplies(shown('return a'), 'return a'));
    assert.ok(!stillApplies(shown('return a'), 'x'));
  });
});

describe('wireItem', () => {
  it('is an InlineCompletionItem with the text shown, its start and the command', () => {
    assert.deepEqual(wireItem(shown('return a', 'g9', 2, 5)), {
      insertText: 'return a',
      range: { start: { line: 2, character: 5 }, end: { line: 2, character: 5 } },
      command: accepted('g9'),
    });
  });
});

describe('AcceptTracker', () => {
  const uri = 'file:///a.py';
  const state = { version: 7, position: { line: 3, character: 4 } };

  it("remembers each answer's command by the state its request was made in", () => {
    const tracker = new AcceptTracker();
    tracker.rememberAnswer(uri, state, accepted('g1'));
    // The ghost text store keys its entries the same way: uri, version and position.
    assert.deepEqual(tracker.commandFor(uri, { version: 7, position: { line: 3, character: 4 } }), accepted('g1'));
    assert.equal(tracker.commandFor(uri, { version: 8, position: { line: 3, character: 4 } }), undefined);
    assert.equal(tracker.commandFor('file:///b.py', state), undefined);
    assert.equal(requestKey(state), '7:3:4');
  });

  it('keeps a few answers per document', () => {
    const tracker = new AcceptTracker();
    for (let version = 1; version <= 20; version++) {
      tracker.rememberAnswer(uri, { version, position: { line: 0, character: 0 } }, accepted(`g${version}`));
    }
    assert.equal(tracker.commandFor(uri, { version: 1, position: { line: 0, character: 0 } }), undefined);
    assert.equal(itemIdOf(tracker.commandFor(uri, { version: 20, position: { line: 0, character: 0 } })), 'g20');
  });

  it('reports an item shown once, however often it is given again (it grows)', () => {
    const tracker = new AcceptTracker();
    assert.equal(tracker.provided(uri, shown('ret', 'g1')), true);
    assert.equal(tracker.provided(uri, shown('return a + b', 'g1')), false);
    assert.equal(tracker.currentFor(uri)?.insertText, 'return a + b');
    assert.equal(tracker.provided(uri, shown('x', 'g2')), true);
    assert.equal(tracker.provided('file:///b.py', shown('x', 'g2')), false);
  });

  it('forgets the current item once it is accepted in full or dismissed', () => {
    const tracker = new AcceptTracker();
    const item = shown('return a', 'g1');
    tracker.provided(uri, item);
    tracker.provided('file:///b.py', shown('y', 'g2'));
    tracker.acceptedId('g1');
    assert.equal(tracker.currentFor(uri), undefined);
    assert.equal(tracker.currentFor('file:///b.py')?.command.arguments?.[0], 'g2');
    tracker.finished('file:///b.py', shown('y', 'g2')); // another object: not the one shown
    assert.notEqual(tracker.currentFor('file:///b.py'), undefined);
  });

  it('starts over for a new server process', () => {
    const tracker = new AcceptTracker();
    tracker.rememberAnswer(uri, state, accepted('g1'));
    tracker.provided(uri, shown('x', 'g1'));
    tracker.clear();
    assert.equal(tracker.commandFor(uri, state), undefined);
    assert.equal(tracker.currentFor(uri), undefined);
    // The new server numbers its items from g1 again: shown again, reported again.
    assert.equal(tracker.provided(uri, shown('x', 'g1')), true);
  });

  it('forgets a closed document', () => {
    const tracker = new AcceptTracker();
    tracker.rememberAnswer(uri, state, accepted('g1'));
    tracker.provided(uri, shown('x', 'g1'));
    tracker.forgetDocument(uri);
    assert.equal(tracker.commandFor(uri, state), undefined);
    assert.equal(tracker.currentFor(uri), undefined);
  });
});
