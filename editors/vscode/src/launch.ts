// How the server process is started: command, arguments and environment, from the settings and
// a description of the host. client.ts turns the result into languageclient ServerOptions; keeping
// the decision here makes it testable without VS Code. No `vscode` import.

import * as path from 'node:path';
import { type ExecutableSearch, type ExecutableSource, findServerExecutable } from './serverPath';

export interface LaunchSettings {
  /** ghostfim.serverPath; empty means "find it". */
  serverPath: unknown;
  /** ghostfim.serverArgs: extra arguments after `serve`. */
  serverArgs: unknown;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Where the executable was found, for the log. */
  source: ExecutableSource;
}

export type LaunchResolution =
  | { ok: true; launch: ServerLaunch }
  | { ok: false; reason: string; searched: string[] };

/** Settings come from JSON the user edits by hand: anything that is not a string is ignored. */
function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

/** The absolute entries of a PATH-like list, e.g. PYTHONPATH, on `platform`. */
export function absoluteEntriesOnly(list: string | undefined, platform: string): string {
  if (list === undefined) return '';
  const api = platform === 'win32' ? path.win32 : path.posix;
  return list
    .split(api.delimiter)
    .filter((entry) => entry !== '' && api.isAbsolute(entry))
    .join(api.delimiter);
}

function serverEnv(
  baseEnv: Readonly<Record<string, string | undefined>>,
  platform: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(baseEnv)) {
    if (value !== undefined) env[key] = value;
  }
  // The server's log lines go to stderr, which is a pipe here: unbuffered output makes them show
  // up in the output channel when they happen, not when a buffer fills.
  env.PYTHONUNBUFFERED = '1';
  // The server runs in the workspace folder, which may be a stranger's repository: a relative
  // or empty PYTHONPATH entry would make Python import that folder's sitecustomize.py before
  // ghostfim's first line, and PYTHONSAFEPATH keeps the folder off sys.path.
  const pythonPath = absoluteEntriesOnly(env.PYTHONPATH, platform);
  if (pythonPath === '') delete env.PYTHONPATH;
  else env.PYTHONPATH = pythonPath;
  env.PYTHONSAFEPATH = '1';
  return env;
}

export function resolveServerLaunch(
  settings: LaunchSettings,
  search: ExecutableSearch,
  baseEnv: Readonly<Record<string, string | undefined>>,
): LaunchResolution {
  const configured = typeof settings.serverPath === 'string' ? settings.serverPath : '';
  const lookup = findServerExecutable(configured, search);
  if (!lookup.found) {
    const reason =
      configured.trim() === ''
        ? 'the ghostfim server was not found in the workspace virtual environment or on PATH'
        : lookup.refused !== undefined
          ? `ghostfim.serverPath "${configured}" is not run: ${lookup.refused}`
          : `ghostfim.serverPath "${configured}" is not an executable file`;
    return { ok: false, reason, searched: lookup.searched };
  }
  return {
    ok: true,
    launch: {
      command: lookup.path,
      args: ['serve', ...stringList(settings.serverArgs)],
      env: serverEnv(baseEnv, search.platform),
      source: lookup.source,
    },
  };
}
