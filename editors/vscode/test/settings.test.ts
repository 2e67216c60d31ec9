import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  isModelSize,
  languageEnabled,
  PROSE_LANGUAGES,
  serverEnable,
  toggleWriteFor,
  toServerSettings,
  writeTargetFor,
} from '../src/settings';

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

describe('serverEnable', () => {
  it('is on when the setting is on, whatever some languages say', () => {
    assert.equal(serverEnable(true, [false, false]), true);
    assert.equal(serverEnable(undefined, []), true);
  });

  it('is on when the setting is off but a language is on ("off, but on for Python")', () => {
    assert.equal(serverEnable(false, [false, true]), true);
  });

  it('is off only when nothing is on anywhere', () => {
    assert.equal(serverEnable(false, []), false);
    assert.equal(serverEnable(false, [false, undefined]), false);
  });
});

describe('toggleWriteFor', () => {
  it("flips the language's own value where it lives", () => {
    assert.deepEqual(toggleWriteFor({ globalLanguageValue: true }), { target: 'global', inLanguage: true });
    assert.deepEqual(toggleWriteFor({ workspaceLanguageValue: false, globalLanguageValue: true }), {
      target: 'workspace',
      inLanguage: true,
    });
    assert.deepEqual(toggleWriteFor({ workspaceFolderLanguageValue: false }), { target: 'workspaceFolder', inLanguage: true });
  });

  it('gives a prose language (off by default) a value of its own in the user settings', () => {
    assert.deepEqual(toggleWriteFor({}, 'markdown'), { target: 'global', inLanguage: true });
    assert.deepEqual(toggleWriteFor({ workspaceLanguageValue: true }, 'markdown'), { target: 'workspace', inLanguage: true });
  });

  it('writes the plain setting when the language has no value of its own', () => {
    assert.deepEqual(toggleWriteFor({ workspaceValue: false }), { target: 'workspace', inLanguage: false });
    assert.deepEqual(toggleWriteFor(undefined), { target: 'global', inLanguage: false });
  });
});

describe('languageEnabled', () => {
  it('leaves prose out by default, as the Neovim plugin does', () => {
    for (const language of ['markdown', 'plaintext', 'gitcommit']) {
      assert.ok(PROSE_LANGUAGES.includes(language));
      assert.equal(languageEnabled(language, true, {}), false, language);
    }
    assert.equal(languageEnabled('python', true, {}), true);
  });

  it("serves prose once the language has a value of its own, wherever it is set", () => {
    assert.equal(languageEnabled('markdown', true, { globalLanguageValue: true }), true);
    assert.equal(languageEnabled('markdown', true, { workspaceFolderLanguageValue: true }), true);
  });

  it("follows the resolved value, which holds the language's own", () => {
    // Off globally, on for Python: VS Code resolves `true` for a Python document.
    assert.equal(languageEnabled('python', true, { globalLanguageValue: true }), true);
    assert.equal(languageEnabled('python', false, {}), false);
    assert.equal(languageEnabled('rust', undefined, undefined), true);
  });
});
