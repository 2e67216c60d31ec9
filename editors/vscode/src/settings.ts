// What the server reads from the `ghostfim` settings section, and how the client shapes it.
// VS Code hands back every `ghostfim.*` key, including client-only ones (serverPath, serverArgs,
// trace); the server is sent exactly the keys of the settings table in docs/protocol.md, nested
// the way it expects (`model.size` -> `{model: {size}}`). No `vscode` import here.

/** The server's settings: the keys of lsp/settings.py and of docs/protocol.md's table (tests check both). */
export const SERVER_SETTING_KEYS = [
  'enable',
  'model.size',
  'model.path',
  'model.draft',
  'nGpuLayers',
  'debounceMs',
  'maxTokens',
  'multiline',
  'prefixTokens',
  'suffixTokens',
  'keystrokePrefillMs',
  'maxRestOfLine',
  'postprocess',
  'filter',
  'acceptanceStats',
  'extraContext',
  'extraContextTokens',
  'workspaceContext',
  'workspaceContextTokens',
  'kvSnapshotMb',
  'maxDocumentMb',
  'backend',
  'backendUrl',
  'backendModel',
  'backendApiKeyEnv',
  'backendTimeoutMs',
  'backendAllowInsecure',
] as const;

export type ServerSettingKey = (typeof SERVER_SETTING_KEYS)[number];

/** Settings only the extension uses; changing one of them needs a new server process. */
export const LAUNCH_SETTING_KEYS = ['serverPath', 'serverArgs'] as const;

export const SECTION = 'ghostfim';

export const MODEL_SIZES = ['tiny', 'small', 'medium', 'large'] as const;
export type ModelSize = (typeof MODEL_SIZES)[number];

/**
 * Client-side value of `ghostfim.model.size` meaning "let the server pick" (small on CPU,
 * medium on a CUDA GPU). It is never sent: the key is left out so the server's own default
 * applies, since the server accepts only the four preset names.
 */
export const AUTO_MODEL_SIZE = 'auto';

/** One line per preset, shown in the quick pick and as the setting's enum descriptions. */
export const MODEL_SIZE_DESCRIPTIONS: Readonly<Record<ModelSize, string>> = {
  tiny: 'SmolLM2 135M Q4_1: no fill-in-the-middle, prefix only; for smoke tests',
  small: 'Qwen2.5-Coder 0.5B Q4_K_M: the CPU default, fast anywhere',
  medium: 'Qwen2.5-Coder 1.5B Q4_K_M: the GPU default, better suggestions',
  large: 'Qwen2.5-Coder 3B Q4_K_M: best suggestions, wants a GPU; Hugging Face download only',
};

export function isModelSize(value: unknown): value is ModelSize {
  return typeof value === 'string' && (MODEL_SIZES as readonly string[]).includes(value);
}

/** Reads one dotted key of the `ghostfim` section (WorkspaceConfiguration.get fits). */
export type SettingReader = (key: string) => unknown;

/** The object the server gets as initializationOptions and in didChangeConfiguration. */
export type ServerSettings = Record<string, unknown>;

/**
 * Builds the server's settings object from the `ghostfim` section. Keys VS Code reports as
 * undefined are left out (the server then uses its default), and so is `model.size: "auto"`.
 */
export function toServerSettings(read: SettingReader): ServerSettings {
  const result: ServerSettings = {};
  for (const key of SERVER_SETTING_KEYS) {
    const value = read(key);
    if (value === undefined) continue;
    if (key === 'model.size' && value === AUTO_MODEL_SIZE) continue;
    setNested(result, key.split('.'), value);
  }
  return result;
}

function setNested(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const child = node[part];
    if (typeof child === 'object' && child !== null && !Array.isArray(child)) {
      node = child as Record<string, unknown>;
    } else {
      const created: Record<string, unknown> = {};
      node[part] = created;
      node = created;
    }
  }
  node[path[path.length - 1]] = value;
}

/**
 * `enable` as the server is told it. The server refuses every request while its `enable` is
 * false and knows nothing of languages, whereas VS Code's `ghostfim.enable` can be set per
 * language both ways ("off, but on for Python"; "on, but off for Markdown"). So the extension
 * gates each document by its own language's value (inlineProvider.ts), and the server is told
 * `true` while any language may be served: the resolved value without a language, or `true` for
 * one of the languages that have a value of their own. `false` reaches it only when nothing is
 * on anywhere, which also stops the server's own background work.
 */
export function serverEnable(resolved: unknown, languageValues: readonly unknown[]): boolean {
  return resolved !== false || languageValues.some((value) => value === true);
}

/**
 * Prose languages: off unless the user gives the language a value of its own, as the Neovim
 * plugin leaves prose out (a code model's suggestions there are noise). Not declared with
 * `configurationDefaults`: in a remote window (code-server) that contribution made VS Code drop
 * the extension's machine-scoped user settings (`serverPath`), seen in tests/e2e/vscode.
 */
export const PROSE_LANGUAGES: readonly string[] = ['markdown', 'plaintext', 'gitcommit', 'git-rebase'];

/**
 * Whether suggestions are on for a document: `resolved` is `ghostfim.enable` read for the
 * document (VS Code applies its language's value), `scopes` the same setting's inspect result
 * for that language. A prose language without a value of its own is off.
 */
export function languageEnabled(languageId: string, resolved: unknown, scopes: LanguageSettingScopes | undefined): boolean {
  const own =
    scopes?.workspaceFolderLanguageValue !== undefined ||
    scopes?.workspaceLanguageValue !== undefined ||
    scopes?.globalLanguageValue !== undefined;
  if (!own && PROSE_LANGUAGES.includes(languageId)) return false;
  return resolved !== false;
}

/** Where a setting currently has a value, as reported by WorkspaceConfiguration.inspect. */
export interface SettingScopes {
  workspaceFolderValue?: unknown;
  workspaceValue?: unknown;
}

export type WriteTarget = 'workspaceFolder' | 'workspace' | 'global';

/** WorkspaceConfiguration.inspect's language-specific values, for one language. */
export interface LanguageSettingScopes extends SettingScopes {
  defaultLanguageValue?: unknown;
  globalLanguageValue?: unknown;
  workspaceLanguageValue?: unknown;
  workspaceFolderLanguageValue?: unknown;
}

/** Where "ghostfim: Toggle" writes, and whether as a value for the editor's language. */
export interface ToggleWrite {
  target: WriteTarget;
  inLanguage: boolean;
}

/**
 * Toggle acts on what the user sees in the focused editor. When its language has a value of its
 * own, a global write would be shadowed by it, so the language's value is flipped, where it
 * lives; a prose language (off by default) gets a value of its own in the user settings.
 * Otherwise the plain value is, as writeTargetFor says.
 */
export function toggleWriteFor(scopes: LanguageSettingScopes | undefined, languageId?: string): ToggleWrite {
  if (scopes?.workspaceFolderLanguageValue !== undefined) return { target: 'workspaceFolder', inLanguage: true };
  if (scopes?.workspaceLanguageValue !== undefined) return { target: 'workspace', inLanguage: true };
  if (scopes?.globalLanguageValue !== undefined || scopes?.defaultLanguageValue !== undefined) {
    return { target: 'global', inLanguage: true };
  }
  if (languageId !== undefined && PROSE_LANGUAGES.includes(languageId)) return { target: 'global', inLanguage: true };
  return { target: writeTargetFor(scopes), inLanguage: false };
}

/**
 * Picks where a command should write a setting so the change takes effect: writing to the
 * user settings while a workspace value exists would be silently shadowed by that value.
 */
export function writeTargetFor(scopes: SettingScopes | undefined): WriteTarget {
  if (scopes?.workspaceFolderValue !== undefined) return 'workspaceFolder';
  if (scopes?.workspaceValue !== undefined) return 'workspace';
  return 'global';
}
