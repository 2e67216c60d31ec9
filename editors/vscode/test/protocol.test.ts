import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { acceptanceOf, budgetsOf, isGhostTextParams, isServerStatus } from '../src/protocol';

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

describe('acceptanceOf', () => {
  it('reads the counts the server reports', () => {
    const acceptance = { shown: 20, accepted: 12, partial: 3, refused: 5, acceptedChars: 240, acceptRate: 0.75 };
    assert.deepEqual(acceptanceOf({ state: 'ready', acceptance }), acceptance);
    assert.deepEqual(acceptanceOf({ state: 'ready', acceptance: { ...acceptance, acceptRate: null } })?.acceptRate, null);
  });

  it('tolerates a server without it, and drops malformed counts', () => {
    assert.equal(acceptanceOf({ state: 'ready' }), undefined);
    assert.equal(acceptanceOf({ state: 'ready', acceptance: null }), undefined);
    assert.equal(acceptanceOf(undefined), undefined);
    const odd = { state: 'ready', acceptance: { accepted: 'many', partial: -1, refused: 2.5, shown: 4 } };
    assert.deepEqual(acceptanceOf(odd as never), { shown: 4 });
  });
});

describe('budgetsOf', () => {
  const budgets = {
    effective: { prefixTokens: 2106, suffixTokens: 256, keystrokePrefillMs: 80, kvSnapshotMb: 256 },
    clamped: [{ setting: 'prefixTokens', asked: 16384, effective: 2106, reason: 'prefill speed' }],
  };

  it('reads the effective budgets and the clamps', () => {
    assert.deepEqual(budgetsOf({ state: 'ready', budgets }), budgets);
  });

  it('tolerates their absence and malformed parts', () => {
    assert.equal(budgetsOf({ state: 'ready' }), undefined);
    assert.equal(budgetsOf({ state: 'ready', budgets: {} }), undefined);
    const odd = { state: 'ready', budgets: { effective: { prefixTokens: 'big' }, clamped: [{ setting: 'x' }, 3] } };
    assert.equal(budgetsOf(odd as never), undefined);
    const some = { state: 'ready', budgets: { clamped: [{ setting: 'suffixTokens', asked: 9000, effective: 300 }] } };
    assert.deepEqual(budgetsOf(some as never), { clamped: [{ setting: 'suffixTokens', asked: 9000, effective: 300 }] });
  });
});
