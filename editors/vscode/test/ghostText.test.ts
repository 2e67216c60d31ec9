import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoalescingRunner, type EditorState, GhostTextStore, preferGrownText, sameState } from '../src/ghostText';
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
