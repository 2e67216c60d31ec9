import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inlineCompletionParams, placeSuggestion, suggestionsFromResult, toLspTriggerKind } from '../src/inlineResult';

describe('toLspTriggerKind', () => {
  it('maps VS Code Invoke (0) to LSP Invoked (1) and Automatic (1) to Automatic (2)', () => {
    assert.equal(toLspTriggerKind(0), 1);
    assert.equal(toLspTriggerKind(1), 2);
  });

  it('treats an unknown kind as automatic', () => {
    assert.equal(toLspTriggerKind(7), 2);
  });
});

describe('inlineCompletionParams', () => {
  it('builds LSP 3.18 params', () => {
    assert.deepEqual(inlineCompletionParams('file:///a.py', { line: 3, character: 8 }, 1), {
      textDocument: { uri: 'file:///a.py' },
      position: { line: 3, character: 8 },
      context: { triggerKind: 2 },
    });
  });

  it('passes the selected completion item along', () => {
    const selected = { range: { start: { line: 1, character: 0 }, end: { line: 1, character: 3 } }, text: 'print' };
    const params = inlineCompletionParams('file:///a.py', { line: 1, character: 3 }, 0, selected);
    assert.deepEqual(params.context, { triggerKind: 1, selectedCompletionInfo: selected });
  });
});

describe('suggestionsFromResult', () => {
  const range = { start: { line: 3, character: 8 }, end: { line: 3, character: 8 } };

  it('reads an InlineCompletionList with ranges', () => {
    assert.deepEqual(suggestionsFromResult({ items: [{ insertText: 'return a + b', range }] }), [
      { text: 'return a + b', isSnippet: false, range },
    ]);
  });

  it('reads a bare item array', () => {
    assert.deepEqual(suggestionsFromResult([{ insertText: 'x' }]), [{ text: 'x', isSnippet: false }]);
  });

  it('answers nothing for null, garbage and empty text', () => {
    assert.deepEqual(suggestionsFromResult(null), []);
    assert.deepEqual(suggestionsFromResult({ items: 'no' }), []);
    assert.deepEqual(suggestionsFromResult({ items: [{ insertText: '' }, { insertText: 3 }, 'x'] }), []);
  });

  it('honours a snippet StringValue and keeps filterText', () => {
    assert.deepEqual(
      suggestionsFromResult({ items: [{ insertText: { kind: 'snippet', value: 'f($1)' }, filterText: 'f' }] }),
      [{ text: 'f($1)', isSnippet: true, filterText: 'f' }],
    );
  });

  it('ignores a malformed range rather than failing', () => {
    assert.deepEqual(suggestionsFromResult({ items: [{ insertText: 'x', range: { start: 1 } }] }), [
      { text: 'x', isSnippet: false },
    ]);
  });
});

describe('placeSuggestion', () => {
  const at = (character: number) => ({ line: 4, character });
  const empty = (character: number) => ({ start: at(character), end: at(character) });

  it('inserts at the request position when nothing was typed since', () => {
    assert.deepEqual(placeSuggestion('rt(x)', empty(18), at(18), '    return math.sq'), {
      text: 'rt(x)',
      range: empty(18),
    });
  });

  it('covers what was typed since the request, so accepting does not insert it twice', () => {
    // Requested after "math.sq"; the user typed "rt" before the answer was shown.
    const placed = placeSuggestion('rt(x)', empty(18), at(20), '    return math.sqrt');
    assert.deepEqual(placed, { text: 'rt(x)', range: { start: at(18), end: at(20) } });
    // What accepting does: replace the range with the text.
    const line = '    return math.sqrt';
    assert.ok(placed);
    const accepted = line.slice(0, placed.range.start.character) + placed.text + line.slice(placed.range.end.character);
    assert.equal(accepted, '    return math.sqrt(x)');
  });

  it('drops a suggestion the typed text does not start, or has used up', () => {
    assert.equal(placeSuggestion('rt(x)', empty(18), at(19), '    return math.sqx'), undefined);
    assert.equal(placeSuggestion('rt', empty(18), at(20), '    return math.sqrt'), undefined);
  });

  it('drops it when the cursor left the line or went back before the request position', () => {
    assert.equal(placeSuggestion('rt(x)', empty(18), { line: 5, character: 0 }, ''), undefined);
    assert.equal(placeSuggestion('rt(x)', empty(18), at(17), '    return math.s'), undefined);
  });

  it("passes a server's non-empty range through", () => {
    const range = { start: at(10), end: at(12) };
    assert.deepEqual(placeSuggestion('abc', range, at(12), 'whatever'), { text: 'abc', range });
  });
});
