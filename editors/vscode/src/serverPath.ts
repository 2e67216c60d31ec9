// Finding the `ghostfim` executable. The file system is reached only through `isFile`, and the
// platform is a parameter, so the Windows rules are tested on any machine. No `vscode` import.

import * as path from 'node:path';

export interface ExecutableSearch {
  /** process.platform of the machine the server runs on. */
  platform: string;
  /** The PATH environment variable. */
  pathEnv: string | undefined;
  /** The PATHEXT environment variable (Windows only). */
  pathExtEnv?: string | undefined;
  homeDir: string;
  /** File-system paths of the open workspace folders, first one first. */
  workspaceFolders: readonly string[];
  /**
   * Whether the workspace is trusted. An untrusted folder's virtual environment is not searched:
   * running a binary that came with the folder would run that folder's code.
   */
  workspaceTrusted: boolean;
  isFile: (candidate: string) => boolean;
  /** The server the extension set up in its own storage (setup.ts), when it is ready. */
  managed?: string;
}

export type ExecutableSource = 'setting' | 'venv' | 'path' | 'managed';

export type ExecutableLookup =
  | { found: true; path: string; source: ExecutableSource }
  | { found: false; searched: string[]; refused?: string };

const EXECUTABLE = 'ghostfim';
const VENV_DIRS = ['.venv', 'venv'];

function pathApi(platform: string): path.PlatformPath {
  return platform === 'win32' ? path.win32 : path.posix;
}

/** `ghostfim` on POSIX; `ghostfim.exe`, `ghostfim.cmd`, ... (from PATHEXT) on Windows. */
function executableNames(name: string, search: ExecutableSearch): string[] {
  if (search.platform !== 'win32') return [name];
  if (pathApi(search.platform).extname(name) !== '') return [name];
  const extensions = (search.pathExtEnv ?? '.COM;.EXE;.BAT;.CMD')
    .split(';')
    .map((ext) => ext.trim().toLowerCase())
    .filter((ext) => ext.length > 0);
  return extensions.map((ext) => name + ext);
}

function venvCandidates(folder: string, search: ExecutableSearch): string[] {
  const api = pathApi(search.platform);
  const binDir = search.platform === 'win32' ? 'Scripts' : 'bin';
  const file = search.platform === 'win32' ? `${EXECUTABLE}.exe` : EXECUTABLE;
  return VENV_DIRS.map((venv) => api.join(folder, venv, binDir, file));
}

function pathCandidates(name: string, search: ExecutableSearch): string[] {
  const api = pathApi(search.platform);
  // A relative PATH entry names a folder of whatever the working directory is: never used.
  const dirs = (search.pathEnv ?? '').split(api.delimiter).filter((dir) => api.isAbsolute(dir));
  const names = executableNames(name, search);
  return dirs.flatMap((dir) => names.map((file) => api.join(dir, file)));
}

/** Expands a leading `~` and `${workspaceFolder}` the way users write them in settings. */
export function expandSettingPath(value: string, search: ExecutableSearch): string {
  const api = pathApi(search.platform);
  let expanded = value.trim();
  const folder = search.workspaceFolders[0];
  if (folder !== undefined) {
    expanded = expanded.split('${workspaceFolder}').join(folder);
  }
  if (expanded === '~') return search.homeDir;
  if (expanded.startsWith('~/') || (search.platform === 'win32' && expanded.startsWith('~\\'))) {
    return api.join(search.homeDir, expanded.slice(2));
  }
  return expanded;
}

function insideAnyFolder(candidate: string, search: ExecutableSearch): boolean {
  const api = pathApi(search.platform);
  return search.workspaceFolders.some((folder) => {
    const relative = api.relative(folder, candidate);
    return relative === '' || (!relative.startsWith('..') && !api.isAbsolute(relative));
  });
}

function firstFile(candidates: string[], search: ExecutableSearch): string | undefined {
  return candidates.find((candidate) => search.isFile(candidate));
}

/**
 * Resolves the server executable. A non-empty `configured` value (ghostfim.serverPath) wins and
 * is the only thing tried: a bare name is looked up on PATH, a relative path is taken from the
 * first workspace folder. Otherwise the workspace's virtual environments come first (they pin
 * the project's own ghostfim), then PATH, then the server the extension set up itself.
 */
export function findServerExecutable(configured: string, search: ExecutableSearch): ExecutableLookup {
  const api = pathApi(search.platform);
  const setting = expandSettingPath(configured, search);
  if (setting !== '') {
    let candidates: string[];
    if (api.isAbsolute(setting)) {
      candidates = executableNames(setting, search);
    } else if (!setting.includes('/') && !(search.platform === 'win32' && setting.includes('\\'))) {
      candidates = pathCandidates(setting, search);
    } else {
      const base = search.workspaceFolders[0];
      candidates = base === undefined ? [] : executableNames(api.resolve(base, setting), search);
    }
    // Your own setting may still name a file inside the folder you opened (`${workspaceFolder}`,
    // a relative path): in an untrusted folder that file is the folder's, and is not run.
    const outside = search.workspaceTrusted
      ? candidates
      : candidates.filter((candidate) => !insideAnyFolder(candidate, search));
    const hit = firstFile(outside, search);
    if (hit !== undefined) return { found: true, path: hit, source: 'setting' };
    const searched = candidates.length > 0 ? candidates : [setting];
    if (outside.length < candidates.length) {
      const refused = 'it is inside the untrusted workspace; trust the folder, or give a path outside it';
      return { found: false, searched, refused };
    }
    return { found: false, searched };
  }

  const venvs = search.workspaceTrusted
    ? search.workspaceFolders.flatMap((folder) => venvCandidates(folder, search))
    : [];
  const venvHit = firstFile(venvs, search);
  if (venvHit !== undefined) return { found: true, path: venvHit, source: 'venv' };

  const onPath = pathCandidates(EXECUTABLE, search);
  const pathHit = firstFile(onPath, search);
  if (pathHit !== undefined) return { found: true, path: pathHit, source: 'path' };

  // Last: the one set up on request, only when nothing the user installed is there.
  const managed = search.managed !== undefined ? [search.managed] : [];
  const managedHit = firstFile(managed, search);
  if (managedHit !== undefined) return { found: true, path: managedHit, source: 'managed' };

  return { found: false, searched: [...venvs, ...onPath, ...managed] };
}
