import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isModelSize, toServerSettings, writeTargetFor } from '../src/settings';

function reader(values: Record<string, unknown>): (key: string) => unknown {
  return (key) => values[key];
}

describe('toServerSettings', () => {
  it('nests model.size and model.path under model', () => {
    const settings = toServerSettings(reader({ 'model.size': 'medium', 'model.path': null, enable: true }));
    assert.deepEqual(settings, { enable: true, model: { size: 'medium', path: null } });
  });

  it('leaves out client-only keys and keys VS Code does not know', () => {
    const settings = toServerSettings(
      reader({ serverPath: '/x', serverArgs: ['-v'], 'trace.server': 'verbose', maxTokens: 32 }),
    );
    assert.deepEqual(settings, { maxTokens: 32 });
  });

  it('leaves model.size out when it is "auto", so the server picks by hardware', () => {
    const settings = toServerSettings(reader({ 'model.size': 'auto', 'model.path': null }));
    assert.deepEqual(settings, { model: { path: null } });
  });

  it('passes debounceMs through as a number or "auto"', () => {
    assert.deepEqual(toServerSettings(reader({ debounceMs: 'auto' })), { debounceMs: 'auto' });
    assert.deepEqual(toServerSettings(reader({ debounceMs: 25 })), { debounceMs: 25 });
  });

  it('keeps false and empty values (they mean something)', () => {
    assert.deepEqual(toServerSettings(reader({ enable: false, backendUrl: '' })), { enable: false, backendUrl: '' });
  });
});

describe('writeTargetFor', () => {
  it('writes where the value currently comes from', () => {
    assert.equal(writeTargetFor({ workspaceFolderValue: 'tiny', workspaceValue: 'small' }), 'workspaceFolder');
    assert.equal(writeTargetFor({ workspaceValue: false }), 'workspace');
    assert.equal(writeTargetFor({}), 'global');
    assert.equal(writeTargetFor(undefined), 'global');
  });
});

describe('isModelSize', () => {
  it('knows the four presets only', () => {
    assert.ok(isModelSize('large'));
    assert.ok(!isModelSize('auto'));
    assert.ok(!isModelSize(3));
  });
});
