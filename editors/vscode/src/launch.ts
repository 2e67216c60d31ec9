// How the server process is started: command, arguments and environment, from the settings and
// a description of the host. client.ts turns the result into languageclient ServerOptions; keeping
// the decision here makes it testable without VS Code. No `vscode` import.

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

function serverEnv(baseEnv: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(baseEnv)) {
    if (value !== undefined) env[key] = value;
  }
  // The server's log lines go to stderr, which is a pipe here: unbuffered output makes them show
  // up in the output channel when they happen, not when a buffer fills.
  env.PYTHONUNBUFFERED = '1';
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
      configured.trim() !== ''
        ? `ghostfim.serverPath "${configured}" is not an executable file`
        : 'the ghostfim server was not found in the workspace virtual environment or on PATH';
    return { ok: false, reason, searched: lookup.searched };
  }
  return {
    ok: true,
    launch: {
      command: lookup.path,
      args: ['serve', ...stringList(settings.serverArgs)],
      env: serverEnv(baseEnv),
      source: lookup.source,
    },
  };
}
