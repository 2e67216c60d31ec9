import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type Cancellation,
  CoalescingRunner,
  type EditorState,
  GhostTextStore,
  preferGrownText,
  sameState,
  typedSince,
  whenDone,
} from '../src/ghostText';
import type { GhostTextParams } from '../src/protocol';

const editor: EditorState = { uri: 'file:///a.py', version: 7, position: { line: 3, character: 8 } };

function update(insertText: string, overrides: Partial<GhostTextParams> = {}): GhostTextParams {
  return { ...editor, insertText, done: false, ...overrides };
}

describe('GhostTextStore', () => {
  it('shows growth for the editor state it was generated for', () => {
    const store = new GhostTextStore();
    assert.equal(store.record(update('ret'), editor), 'show');
    assert.equal(store.record(update('return a'), editor), 'show');
    assert.equal(store.lookup(editor)?.insertText, 'return a');
  });

  it('drops notifications for another version, position or document', () => {
    const store = new GhostTextStore();
    assert.equal(store.record(update('x', { version: 6 }), editor), 'stale');
    assert.equal(store.record(update('x', { position: { line: 3, character: 9 } }), editor), 'stale');
    assert.equal(store.record(update('x', { uri: 'file:///b.py' }), editor), 'stale');
    assert.equal(store.record(update('x'), undefined), 'stale');
    assert.equal(store.lookup(editor), undefined);
  });

  it('does not re-query for a repeat of the same text, but keeps the done flag', () => {
    const store = new GhostTextStore();
    store.record(update('return a'), editor);
    assert.equal(store.record(update('return a', { done: true }), editor), 'unchanged');
    assert.equal(store.lookup(editor)?.done, true);
  });

  it('answers only for exactly the stored state', () => {
    const store = new GhostTextStore();
    store.record(update('return a'), editor);
    assert.equal(store.lookup({ ...editor, version: 8 }), undefined);
    assert.equal(store.lookup({ ...editor, position: { line: 3, character: 9 } }), undefined);
  });

  it('keeps one entry per document: a newer state replaces the older', () => {
    const store = new GhostTextStore();
    store.record(update('a'), editor);
    const next: EditorState = { ...editor, version: 8, position: { line: 3, character: 9 } };
    store.record(update('b', next), next);
    assert.equal(store.size, 1);
    assert.equal(store.lookup(editor), undefined);
    assert.equal(store.lookup(next)?.insertText, 'b');
  });

  it('stays quiet after the user dismissed the suggestion at that state', () => {
    const store = new GhostTextStore();
    store.record(update('ret'), editor);
    store.dismiss(editor);
    assert.equal(store.lookup(editor), undefined);
    assert.equal(store.record(update('return a'), editor), 'stale');
    // Typing on is a new state: suggestions are welcome again.
    const typed: EditorState = { ...editor, version: 8, position: { line: 3, character: 9 } };
    assert.equal(store.record(update('eturn a', typed), typed), 'show');
  });

  it('forgets closed documents', () => {
    const store = new GhostTextStore();
    store.record(update('a'), editor);
    store.forgetDocument(editor.uri);
    assert.equal(store.size, 0);
  });
});

describe('typed-through growth', () => {
  // The request was made at character 8, after "    retu"; the user then typed "rn".
  const typedOn: EditorState = { ...editor, version: 9, position: { line: 3, character: 10 }, lineText: '    return' };

  it('tells what was typed since a request, one version per character', () => {
    assert.equal(typedSince(update('rn a'), typedOn), 'rn');
  });

  it('refuses anything but plain typing into the suggestion', () => {
    // Not what the suggestion says.
    assert.equal(typedSince(update('rn a'), { ...typedOn, lineText: '    retuxx' }), undefined);
    // More edits than characters: something else changed too.
    assert.equal(typedSince(update('rn a'), { ...typedOn, version: 11 }), undefined);
    // Another line, or the cursor went back.
    assert.equal(typedSince(update('rn a'), { ...typedOn, position: { line: 4, character: 10 } }), undefined);
    assert.equal(typedSince(update('rn a'), { ...editor, version: 6, position: { line: 3, character: 7 }, lineText: '    ret' }), undefined);
    // The suggestion is used up.
    assert.equal(typedSince(update('rn'), typedOn), undefined);
    // The line is unknown.
    assert.equal(typedSince(update('rn a'), { ...typedOn, lineText: undefined }), undefined);
  });

  it('keeps growth for a state typed on from only when asked to', () => {
    const store = new GhostTextStore();
    assert.equal(store.record(update('rn a'), typedOn), 'stale');
    assert.equal(store.record(update('rn a'), typedOn, true), 'show');
    assert.deepEqual(store.match(typedOn), { entry: update('rn a'), typed: 'rn' });
    // lookup stays exact: a fresh answer is only merged with growth of its very state.
    assert.equal(store.lookup(typedOn), undefined);
  });

  it('never lets an older request replace a newer one', () => {
    const store = new GhostTextStore();
    const newer = update(' a', { version: 9, position: { line: 3, character: 10 } });
    assert.equal(store.record(newer, typedOn), 'show');
    assert.equal(store.record(update('rn a'), typedOn, true), 'stale');
    assert.equal(store.match(typedOn)?.entry.insertText, ' a');
  });

  it('stays dismissed when the user dismissed at either state', () => {
    const store = new GhostTextStore();
    store.dismiss(typedOn);
    assert.equal(store.record(update('rn a'), typedOn, true), 'stale');
    const other = new GhostTextStore();
    other.record(update('rn a'), typedOn, true);
    other.dismiss(editor);
    assert.equal(other.match(typedOn), undefined);
  });
});

describe('whenDone', () => {
  function token(): Cancellation & { cancel(): void } {
    const listeners: (() => void)[] = [];
    const t = {
      isCancellationRequested: false,
      onCancellationRequested(listener: () => void) {
        listeners.push(listener);
        return { dispose: () => undefined };
      },
      cancel() {
        t.isCancellationRequested = true;
        for (const listener of listeners) listener();
      },
    };
    return t;
  }

  it('waits for the last notification of the generation, then gives its whole text', async () => {
    const store = new GhostTextStore();
    store.record(update('"""'), editor);
    const done = whenDone(store, editor, token(), 5000);
    store.record(update('"""The median'), editor);
    store.record(update('"""The median."""\n    return', { done: true }), editor);
    assert.equal((await done)?.entry.insertText, '"""The median."""\n    return');
  });

  it('gives up when the user types on, dismisses, or the wait runs out', async () => {
    const store = new GhostTextStore();
    store.record(update('ret'), editor);
    const cancelled = token();
    const typing = whenDone(store, editor, cancelled, 5000);
    cancelled.cancel();
    assert.equal(await typing, undefined);

    const dismissing = whenDone(store, editor, token(), 5000);
    store.dismiss(editor);
    assert.equal(await dismissing, undefined);

    const other = new GhostTextStore();
    other.record(update('ret'), editor);
    assert.equal((await whenDone(other, editor, token(), 10))?.entry.insertText, 'ret');
  });
});

describe('sameState', () => {
  it('compares uri, version, line and character', () => {
    assert.ok(sameState(editor, { ...editor, position: { ...editor.position } }));
    assert.ok(!sameState(editor, { ...editor, uri: 'file:///A.py' }));
  });
});

describe('preferGrownText', () => {
  it('uses stored growth that continues the answer', () => {
    assert.equal(preferGrownText('ret', update('return a')), 'return a');
  });

  it('keeps the answer when the stored text is shorter or different', () => {
    assert.equal(preferGrownText('return a', update('ret')), 'return a');
    assert.equal(preferGrownText('print()', update('return a')), 'print()');
    assert.equal(preferGrownText('x', undefined), 'x');
  });
});

describe('CoalescingRunner', () => {
  it('folds requests made during a run into one more run', async () => {
    let runs = 0;
    let release: () => void = () => undefined;
    const runner = new CoalescingRunner(async () => {
      runs += 1;
      if (runs === 1) await new Promise<void>((resolve) => (release = resolve));
    });
    runner.request();
    runner.request();
    runner.request();
    runner.request();
    assert.equal(runs, 1);
    release();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(runs, 2);
    runner.request();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(runs, 3);
  });

  it('reports a failing task and keeps working', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const runner = new CoalescingRunner(
      () => {
        calls += 1;
        return Promise.reject(new Error('boom'));
      },
      (error) => errors.push(error),
    );
    runner.request();
    await new Promise((resolve) => setImmediate(resolve));
    runner.request();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(calls, 2);
    assert.equal(errors.length, 2);
  });

  it('does nothing once disposed', async () => {
    let calls = 0;
    const runner = new CoalescingRunner(() => {
      calls += 1;
      return Promise.resolve();
    });
    runner.dispose();
    runner.request();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(calls, 0);
  });
});
