// What the server reads from the `ghostfim` settings section, and how the client shapes it.
// VS Code hands back every `ghostfim.*` key, including client-only ones (serverPath, serverArgs,
// trace); the server is sent exactly the keys of the settings table in docs/protocol.md, nested
// the way it expects (`model.size` -> `{model: {size}}`). No `vscode` import here.

/** The keys of the settings table in docs/protocol.md, in its order (a test checks for drift). */
export const SERVER_SETTING_KEYS = [
  'enable',
  'model.size',
  'model.path',
  'nGpuLayers',
  'debounceMs',
  'maxTokens',
  'multiline',
  'prefixTokens',
  'suffixTokens',
  'keystrokePrefillMs',
  'maxRestOfLine',
  'postprocess',
  'extraContext',
  'extraContextTokens',
  'backend',
  'backendUrl',
  'backendModel',
  'backendApiKeyEnv',
  'backendTimeoutMs',
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

/** Where a setting currently has a value, as reported by WorkspaceConfiguration.inspect. */
export interface SettingScopes {
  workspaceFolderValue?: unknown;
  workspaceValue?: unknown;
}

export type WriteTarget = 'workspaceFolder' | 'workspace' | 'global';

/**
 * Picks where a command should write a setting so the change takes effect: writing to the
 * user settings while a workspace value exists would be silently shadowed by that value.
 */
export function writeTargetFor(scopes: SettingScopes | undefined): WriteTarget {
  if (scopes?.workspaceFolderValue !== undefined) return 'workspaceFolder';
  if (scopes?.workspaceValue !== undefined) return 'workspace';
  return 'global';
}
