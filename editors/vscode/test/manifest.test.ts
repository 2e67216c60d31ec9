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
  default?: unknown;
  description?: string;
  markdownDescription?: string;
  enum?: unknown[];
  enumDescriptions?: string[];
}

interface Manifest {
  main: string;
  engines: { vscode: string };
  publisher: string;
  license: string;
  activationEvents?: string[];
  contributes: {
    configuration: { properties: Record<string, ConfigProperty> };
    commands: { command: string; title: string }[];
    keybindings: { command: string; key: string; when?: string }[];
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
    for (const id of ['ghostfim.switchModelSize', 'ghostfim.toggle', 'ghostfim.showStatus', 'ghostfim.restartServer']) {
      assert.ok(commands.includes(id), `${id} is contributed`);
    }
  });

  it('binds accept word and accept line while a suggestion is visible', () => {
    for (const id of ['editor.action.inlineSuggest.acceptNextWord', 'editor.action.inlineSuggest.acceptNextLine']) {
      const binding = manifest.contributes.keybindings.find((b) => b.command === id);
      assert.ok(binding, `${id} has a keybinding`);
      assert.match(binding.when ?? '', /inlineSuggestionVisible/);
    }
  });

  it('is packageable for VS Code 1.90 and later', () => {
    assert.equal(manifest.engines.vscode, '^1.90.0');
    assert.equal(manifest.publisher, 'ghostfim');
    assert.equal(manifest.license, 'Apache-2.0');
    assert.equal(manifest.main, './dist/extension.js');
  });
});
