// Catches drift between docs/protocol.md (the server's contract), settings.ts and package.json:
// a server setting added to the doc but not declared here would silently never reach the server.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { LAUNCH_SETTING_KEYS, MODEL_SIZE_DESCRIPTIONS, MODEL_SIZES, SERVER_SETTING_KEYS } from '../src/settings';

// Compiled to out/test/, so the package root is two levels up.
const packageRoot = path.resolve(__dirname, '..', '..');
const protocolDoc = path.resolve(packageRoot, '..', '..', 'docs', 'protocol.md');

interface ConfigProperty {
  type?: string | string[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  scope?: string;
  default?: unknown;
  description?: string;
  markdownDescription?: string;
  enum?: unknown[];
  enumDescriptions?: string[];
}

interface Manifest {
  capabilities: {
    untrustedWorkspaces: { supported: boolean | 'limited'; description?: string; restrictedConfigurations?: string[] };
  };
  main: string;
  engines: { vscode: string };
  publisher: string;
  license: string;
  activationEvents?: string[];
  contributes: {
    configuration: { properties: Record<string, ConfigProperty> };
    configurationDefaults?: Record<string, Record<string, unknown>>;
    commands: { command: string; title: string }[];
    keybindings: { command: string; key: string; mac?: string; when?: string }[];
  };
}

const manifest = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as Manifest;
const properties = manifest.contributes.configuration.properties;

interface DocSetting {
  key: string;
  type: string;
  defaultText: string;
}

/** The rows of the table under "## Settings" in docs/protocol.md. */
function documentedSettings(): DocSetting[] {
  const text = readFileSync(protocolDoc, 'utf8');
  const section = text.split(/^## /m).find((part) => part.startsWith('Settings'));
  assert.ok(section, 'docs/protocol.md has a "## Settings" section');
  const rows: DocSetting[] = [];
  for (const line of section.split('\n')) {
    // Cells are split on `|` not preceded by a backslash (the doc escapes `\|` inside a cell).
    const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
    const key = /^`([^`]+)`$/.exec(cells[1] ?? '')?.[1];
    if (key === undefined) continue;
    rows.push({ key, type: cells[2] ?? '', defaultText: cells[3] ?? '' });
  }
  return rows;
}

function backticked(text: string): string[] {
  return [...text.matchAll(/`([^`]*)`/g)].map((match) => match[1]);
}

/** The enum values of a type cell like "`auto`\|`always`\|`never`", else undefined. */
function enumValues(type: string): string[] | undefined {
  const values = backticked(type);
  const bare = type.replace(/`[^`]*`/g, '').replace(/\\\|/g, '').trim();
  return values.length > 1 && bare === '' ? values : undefined;
}

/** The documented default as a JSON value, when the cell names exactly one value. */
function documentedDefault(setting: DocSetting): { value: unknown } | undefined {
  const tokens = backticked(setting.defaultText);
  if (tokens.length !== 1) return undefined;
  try {
    return { value: JSON.parse(tokens[0]) as unknown };
  } catch {
    return enumValues(setting.type)?.includes(tokens[0]) ? { value: tokens[0] } : undefined;
  }
}

describe('package.json against docs/protocol.md', () => {
  const documented = documentedSettings();

  it('finds the settings table', () => {
    assert.ok(documented.length >= 10, `only ${documented.length} rows parsed`);
  });

  it('settings.ts lists exactly the documented server settings', () => {
    assert.deepEqual([...SERVER_SETTING_KEYS].sort(), documented.map((s) => s.key).sort());
  });

  for (const setting of documented) {
    describe(`ghostfim.${setting.key}`, () => {
      const property = properties[`ghostfim.${setting.key}`];

      it('is declared with a description and a default', () => {
        assert.ok(property, 'declared in contributes.configuration');
        assert.ok(property.description ?? property.markdownDescription, 'has a description');
        assert.ok('default' in property, 'has a default');
      });

      const values = enumValues(setting.type);
      if (values !== undefined) {
        it('offers every documented value', () => {
          for (const value of values) assert.ok(property?.enum?.includes(value), `enum lacks ${value}`);
          assert.equal(property?.enumDescriptions?.length, property?.enum?.length, 'one description per value');
        });
      }

      const expected = documentedDefault(setting);
      if (expected !== undefined) {
        it('has the documented default', () => {
          assert.deepEqual(property?.default, expected.value);
        });
      }
    });
  }

  it('accepts both a number and "auto" for debounceMs', () => {
    assert.deepEqual(properties['ghostfim.debounceMs']?.type, ['number', 'string']);
  });

  it('describes the model presets as settings.ts does', () => {
    const size = properties['ghostfim.model.size'];
    assert.ok(size?.enum && size.enumDescriptions);
    for (const preset of MODEL_SIZES) {
      const index = size.enum.indexOf(preset);
      assert.ok(index >= 0, `enum lacks ${preset}`);
      assert.equal(size.enumDescriptions[index], MODEL_SIZE_DESCRIPTIONS[preset]);
    }
  });

  it('declares the launch settings', () => {
    for (const key of LAUNCH_SETTING_KEYS) {
      const property = properties[`ghostfim.${key}`];
      assert.ok(property?.description ?? property?.markdownDescription, `ghostfim.${key} is declared`);
    }
  });
});

describe('package.json contributions', () => {
  it('declares the commands', () => {
    const commands = manifest.contributes.commands.map((c) => c.command);
    for (const id of ['ghostfim.switchModelSize', 'ghostfim.toggle', 'ghostfim.showStatus', 'ghostfim.restartServer', 'ghostfim.setUpServer']) {
      assert.ok(commands.includes(id), `${id} is contributed`);
    }
  });

  it('binds accept word and accept line to its own commands while a suggestion is visible', () => {
    // Our commands run VS Code's and then report the partial accept to the server (VS Code runs
    // an item's command only after a full accept). Binding VS Code's commands directly would
    // accept without telling the server.
    const bindings = manifest.contributes.keybindings;
    const word = bindings.find((b) => b.command === 'ghostfim.acceptNextWord');
    const line = bindings.find((b) => b.command === 'ghostfim.acceptNextLine');
    assert.ok(word && line, 'accept word and accept line are bound');
    assert.equal(word.key, 'ctrl+right');
    assert.equal(word.mac, 'cmd+right');
    assert.equal(line.key, 'shift+tab');
    for (const binding of [word, line]) assert.match(binding.when ?? '', /inlineSuggestionVisible/);
    for (const id of ['editor.action.inlineSuggest.acceptNextWord', 'editor.action.inlineSuggest.acceptNextLine']) {
      assert.equal(bindings.find((b) => b.command === id), undefined, `${id} is not bound directly`);
    }
    // ghostfim.accepted is the server's: languageclient registers it, and a second registration
    // (a contributed command is harmless, a registered one is not) would break the client's start.
    assert.equal(manifest.contributes.commands.find((c) => c.command === 'ghostfim.accepted'), undefined);
  });

  it("takes none of VS Code's default editor keys", () => {
    // VS Code 1.139's default keybindings in a text editor on Linux, Windows and macOS that a
    // ghost-text binding could plausibly take (Keyboard Shortcuts, "Show Default Keybindings"):
    // scroll, cursor and line moves, word moves, multi-cursor, and the inline-suggest keys.
    const vscodeDefaults = new Set([
      'ctrl+down', 'ctrl+up', 'cmd+down', 'cmd+up', 'ctrl+right', 'ctrl+left', 'cmd+right', 'cmd+left',
      'alt+right', 'alt+left', 'alt+up', 'alt+down', 'shift+alt+up', 'shift+alt+down', 'ctrl+shift+up',
      'ctrl+shift+down', 'ctrl+alt+up', 'ctrl+alt+down', 'alt+cmd+up', 'alt+cmd+down', 'ctrl+end', 'ctrl+home',
      'end', 'home', 'tab', 'alt+]', 'alt+[', 'alt+\\', 'ctrl+enter', 'ctrl+shift+enter', 'ctrl+i',
    ]);
    // The one exception: VS Code's own accept-next-word key, taken only where VS Code's binding of
    // it applies (a suggestion visible), for the command that runs VS Code's and reports it.
    const sameAction: Record<string, string[]> = { 'ghostfim.acceptNextWord': ['ctrl+right', 'cmd+right'] };
    for (const binding of manifest.contributes.keybindings) {
      for (const key of [binding.key, binding.mac].filter((k): k is string => k !== undefined)) {
        if (sameAction[binding.command]?.includes(key) && /\binlineSuggestionVisible\b/.test(binding.when ?? '')) continue;
        assert.ok(!vscodeDefaults.has(key.toLowerCase()), `${binding.command} takes ${key}, one of VS Code's own keys`);
      }
    }
  });

  it('packages the ghostfim wheel it sets its server up from, and refuses to package without it', () => {
    const ignore = readFileSync(path.join(packageRoot, '.vscodeignore'), 'utf8').split('\n');
    assert.ok(ignore.includes('!server/ghostfim-*.whl'), '.vscodeignore keeps server/ghostfim-*.whl');
    const scripts = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    assert.match(scripts['vscode:prepublish'] ?? '', /^node scripts\/check-wheel\.mjs && /);
  });

  it('is packageable for VS Code 1.90 and later', () => {
    assert.equal(manifest.engines.vscode, '^1.90.0');
    assert.equal(manifest.publisher, 'ghostfim');
    assert.equal(manifest.license, 'Apache-2.0');
    assert.equal(manifest.main, './dist/extension.js');
  });
});

// lsp/settings.py is the source of truth of the server's settings: its `KEYS` table names each
// key's validator, e.g. `"maxTokens": ("max_tokens", IntRange(1, 1024)),`. (tests/test_settings_sync.py
// checks the same from Python; this keeps `npm test` honest on its own.)
const settingsPy = path.resolve(packageRoot, '..', '..', 'lsp', 'settings.py');

interface ServerRule {
  key: string;
  kind: 'integer' | 'number' | 'boolean' | 'choice' | 'string' | 'other';
  min?: number;
  max?: number;
}

function pyNumber(text: string): number {
  return Number(text.replace(/_/g, ''));
}

function serverRules(): ServerRule[] {
  const source = readFileSync(settingsPy, 'utf8');
  const table = /^_?KEYS\b[^=]*=\s*\{([\s\S]*?)\n\}/m.exec(source)?.[1];
  assert.ok(table, 'lsp/settings.py has a KEYS table');
  const rules: ServerRule[] = [];
  for (const match of table.matchAll(/"([\w.]+)":\s*\("\w+",\s*(\w+)(?:\(([^)]*)\))?\)/g)) {
    const [, key, validator, args] = match;
    const range = (args ?? '')
      .split(',')
      .map((part) => part.trim())
      .filter((part) => /^-?[\d_.]+$/.test(part))
      .map(pyNumber);
    if (validator === 'IntRange' && range.length === 2) rules.push({ key, kind: 'integer', min: range[0], max: range[1] });
    else if (validator === 'NumberRange' && range.length === 2) rules.push({ key, kind: 'number', min: range[0], max: range[1] });
    else if (validator === '_bool') rules.push({ key, kind: 'boolean' });
    else if (validator === '_choice' || validator === '_model_size') rules.push({ key, kind: 'choice' });
    else if (validator === '_str' || validator === '_optional_str') rules.push({ key, kind: 'string' });
    else rules.push({ key, kind: 'other' });
  }
  return rules;
}

describe('package.json against lsp/settings.py', () => {
  const rules = serverRules();

  it('finds every server setting', () => {
    assert.deepEqual(rules.map((r) => r.key).sort(), [...SERVER_SETTING_KEYS].sort());
  });

  for (const rule of rules.filter((r) => r.min !== undefined)) {
    it(`ghostfim.${rule.key} has the server's range ${rule.min}..${rule.max}`, () => {
      const property = properties[`ghostfim.${rule.key}`];
      assert.ok(property, 'declared');
      // The Settings UI must refuse exactly what the server would refuse.
      assert.equal(property.minimum, rule.min, 'minimum');
      assert.equal(property.maximum, rule.max, 'maximum');
      const types = ([] as string[]).concat(property.type ?? []);
      assert.ok(types.includes(rule.kind), `type ${JSON.stringify(property.type)} admits ${rule.kind}`);
      if (typeof property.default === 'number') {
        assert.ok(property.default >= (rule.min ?? -Infinity) && property.default <= (rule.max ?? Infinity), 'default in range');
      }
    });
  }
});

describe('editors/vscode/README.md', () => {
  const readme = readFileSync(path.join(packageRoot, 'README.md'), 'utf8');

  it('documents every setting package.json declares', () => {
    for (const key of Object.keys(properties)) {
      assert.ok(readme.includes(`\`${key}\``), `README.md documents ${key}`);
    }
  });

  it('names the keys it binds', () => {
    assert.match(readme, /^\| `Shift\+Tab` \|/m);
    assert.doesNotMatch(readme, /^\| `Ctrl\+Down`/m);
  });
});

describe('language and machine scopes', () => {
  it('leaves prose out in the client, not with configurationDefaults', () => {
    // configurationDefaults made code-server drop the machine-scoped user settings (settings.ts).
    assert.equal(manifest.contributes.configurationDefaults, undefined);
    assert.equal(properties['ghostfim.enable']?.scope, 'language-overridable');
    assert.match(properties['ghostfim.enable']?.markdownDescription ?? '', /Prose .* is off/);
  });

  it('keeps machine paths to the machine', () => {
    for (const key of ['ghostfim.model.path', 'ghostfim.serverPath', 'ghostfim.serverArgs']) {
      assert.match(properties[key]?.scope ?? '', /^machine/, `${key} is machine-scoped`);
    }
  });
});

// lsp/settings.py classifies every setting for workspace trust: TRUST_SENSITIVE names those whose
// value runs a program, loads or downloads a model, or sends code or keys to a host, e.g.
// `"model.path": "llama.cpp parses the GGUF file it names",`. VS Code ignores an untrusted
// workspace's own values of exactly the restrictedConfigurations (it drops them when it parses the
// workspace's settings, so neither get() nor inspect() sees them).
function trustSensitiveKeys(): string[] {
  const source = readFileSync(settingsPy, 'utf8');
  const table = /^TRUST_SENSITIVE\b[^=]*=\s*\{([\s\S]*?)\n\}/m.exec(source)?.[1];
  assert.ok(table, 'lsp/settings.py has a TRUST_SENSITIVE table');
  return [...table.matchAll(/^ {4}"([\w.]+)":/gm)].map((match) => match[1]);
}

describe('workspace trust', () => {
  const trust = manifest.capabilities.untrustedWorkspaces;
  const restricted = trust.restrictedConfigurations ?? [];

  it('works in Restricted Mode with the sensitive settings restricted', () => {
    assert.equal(trust.supported, 'limited');
    assert.ok(trust.description, 'says what is limited');
  });

  it('restricts exactly the settings lsp/settings.py calls trust-sensitive', () => {
    const sensitive = trustSensitiveKeys();
    assert.ok(sensitive.length >= 10, `only ${sensitive.length} keys parsed`);
    assert.deepEqual([...restricted].sort(), sensitive.map((key) => `ghostfim.${key}`).sort());
    assert.equal(new Set(restricted).size, restricted.length, 'no key twice');
  });

  it('restricts only declared settings', () => {
    // A misspelt key would restrict nothing, silently.
    for (const key of restricted) assert.ok(properties[key], `${key} is declared in contributes.configuration`);
  });

  it('restricts every setting that takes free text, and the launch settings', () => {
    // A string without a fixed set of values, or a list, can name a file, a program or a host.
    for (const [key, property] of Object.entries(properties)) {
      const types = ([] as string[]).concat(property.type ?? []);
      const freeText = (types.includes('string') && property.enum === undefined && property.pattern === undefined) || types.includes('array');
      if (freeText) assert.ok(restricted.includes(key), `${key} takes free text but is not restricted`);
    }
    for (const key of LAUNCH_SETTING_KEYS) assert.ok(restricted.includes(`ghostfim.${key}`), `ghostfim.${key} runs a program`);
  });

  it('lists the restricted settings in README.md', () => {
    const readme = readFileSync(path.join(packageRoot, 'README.md'), 'utf8');
    const section = readme.split(/^### /m).find((part) => part.startsWith('Untrusted workspaces'));
    assert.ok(section, 'README.md has an "Untrusted workspaces" section');
    for (const key of restricted) assert.ok(section.includes(`\`${key}\``), `the section lists ${key}`);
  });
});
