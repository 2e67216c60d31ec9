import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isGhostTextParams, isServerStatus } from '../src/protocol';

describe('isGhostTextParams', () => {
  it('accepts the documented payload', () => {
    assert.ok(
      isGhostTextParams({
        uri: 'file:///a.py',
        version: 7,
        position: { line: 3, character: 8 },
        insertText: 'return a + b',
        done: false,
      }),
    );
  });

  it('rejects payloads missing fields or with wrong types', () => {
    const good = { uri: 'file:///a.py', version: 7, position: { line: 3, character: 8 }, insertText: 'x', done: true };
    assert.ok(!isGhostTextParams(null));
    assert.ok(!isGhostTextParams({ ...good, uri: 1 }));
    assert.ok(!isGhostTextParams({ ...good, position: { line: -1, character: 0 } }));
    assert.ok(!isGhostTextParams({ ...good, insertText: undefined }));
    assert.ok(!isGhostTextParams({ ...good, done: 'no' }));
  });
});

describe('isServerStatus', () => {
  it('accepts the three states only', () => {
    assert.ok(isServerStatus({ state: 'ready' }));
    assert.ok(isServerStatus({ state: 'loading', model: null }));
    assert.ok(!isServerStatus({ state: 'sleeping' }));
    assert.ok(!isServerStatus([]));
  });
});
