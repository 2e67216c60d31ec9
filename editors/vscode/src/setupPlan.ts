// The server the extension sets up by itself, as decisions without VS Code: where it lives (the
// extension's global storage, never the workspace), which Python makes it, what `ghostfim setup
// --json` reports and how that reads in a progress notification, and whether an install is
// ready or needs the bundled wheel again. setup.ts runs the processes. No `vscode` import.

import * as path from 'node:path';

/** Where the managed install lives, under the extension's global storage folder. */
export interface ManagedPaths {
  root: string;
  venv: string;
  /** The venv's interpreter. */
  python: string;
  /** The venv's `ghostfim` script: the server. */
  server: string;
  /** What was installed, written once `ghostfim setup` said ready (InstallState). */
  stateFile: string;
}

function pathApi(platform: string): path.PlatformPath {
  return platform === 'win32' ? path.win32 : path.posix;
}

export function managedPaths(storage: string, platform: string): ManagedPaths {
  const api = pathApi(platform);
  const venv = api.join(storage, 'venv');
  const bin = platform === 'win32' ? api.join(venv, 'Scripts') : api.join(venv, 'bin');
  return {
    root: storage,
    venv,
    python: api.join(bin, platform === 'win32' ? 'python.exe' : 'python'),
    server: api.join(bin, platform === 'win32' ? 'ghostfim.exe' : 'ghostfim'),
    stateFile: api.join(storage, 'install.json'),
  };
}

/** A way to run a Python: the command and the arguments before the script's own. */
export interface PythonCommand {
  command: string;
  args: string[];
  /** Where it came from, for the log. */
  source: 'python-extension' | 'path';
}

export interface PythonSearch {
  platform: string;
  pathEnv: string | undefined;
  pathExtEnv?: string | undefined;
  /** The Python extension's interpreter for the workspace, if it has one. */
  pythonExtension?: string;
  /**
   * Whether the workspace is trusted. The Python extension's interpreter is often the
   * workspace's own .venv: an untrusted folder's interpreter is not run.
   */
  workspaceTrusted: boolean;
  isFile: (candidate: string) => boolean;
}

/** The PATH entries a lookup may use: absolute ones only (a relative one names a folder of the workspace). */
function absoluteDirs(search: PythonSearch): string[] {
  const api = pathApi(search.platform);
  return (search.pathEnv ?? '').split(api.delimiter).filter((dir) => dir.length > 0 && api.isAbsolute(dir));
}

function onPath(name: string, search: PythonSearch): string | undefined {
  const api = pathApi(search.platform);
  const names =
    search.platform === 'win32'
      ? (search.pathExtEnv ?? '.COM;.EXE;.BAT;.CMD')
          .split(';')
          .filter((ext) => ext.length > 0)
          .map((ext) => name + ext.toLowerCase())
      : [name];
  for (const dir of absoluteDirs(search)) {
    for (const file of names) {
      const candidate = api.join(dir, file);
      if (search.isFile(candidate)) return candidate;
    }
  }
  return undefined;
}

/**
 * The Pythons to try, best first: the Python extension's interpreter (trusted workspaces only),
 * then `python3` and `python` on PATH; on Windows the `py` launcher first (`py -3`), whose
 * `python.exe` on PATH may be the Microsoft Store's stand-in.
 */
export function pythonCandidates(search: PythonSearch): PythonCommand[] {
  const found: PythonCommand[] = [];
  if (search.workspaceTrusted && search.pythonExtension !== undefined && search.pythonExtension !== '') {
    found.push({ command: search.pythonExtension, args: [], source: 'python-extension' });
  }
  const names = search.platform === 'win32' ? ['py', 'python3', 'python'] : ['python3', 'python'];
  for (const name of names) {
    const hit = onPath(name, search);
    if (hit !== undefined && !found.some((c) => c.command === hit)) {
      found.push({ command: hit, args: name === 'py' ? ['-3'] : [], source: 'path' });
    }
  }
  return found;
}

/** Run with `-I -c`: the version, and whether the venv module can make an environment with pip. */
export const PYTHON_PROBE =
  'import json, sys\n' +
  'try:\n' +
  '    import ensurepip, venv\n' +
  '    ok = True\n' +
  'except ImportError:\n' +
  '    ok = False\n' +
  'print(json.dumps({"version": list(sys.version_info[:3]), "executable": sys.executable, "venv": ok}))\n';

export interface PythonFound {
  version: [number, number, number];
  executable: string;
  venv: boolean;
}

export function parsePythonProbe(stdout: string): PythonFound | undefined {
  const line = stdout.trim().split(/\r?\n/).pop() ?? '';
  try {
    const value: unknown = JSON.parse(line);
    if (!isRecord(value) || !Array.isArray(value.version) || typeof value.executable !== 'string') return undefined;
    const [major, minor, micro] = value.version as unknown[];
    if (typeof major !== 'number' || typeof minor !== 'number' || typeof micro !== 'number') return undefined;
    return { version: [major, minor, micro], executable: value.executable, venv: value.venv === true };
  } catch {
    return undefined;
  }
}

export const MIN_PYTHON: [number, number] = [3, 10];

export function pythonIsRecent(found: PythonFound): boolean {
  const [major, minor] = found.version;
  return major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
}

export type Missing = 'python' | 'venv';

const PLATFORM_NAMES = { debian: 'Debian/Ubuntu', fedora: 'Fedora', macos: 'macOS', windows: 'Windows' } as const;
export type PlatformKey = keyof typeof PLATFORM_NAMES;

/**
 * What installs Python or its venv module, by platform: the same commands `ghostfim setup` gives
 * (engine/setup/platforms.py's FIXES; tests/unit/engine/setup/test_install.py checks they agree).
 */
export const FIXES: Record<Missing, Record<PlatformKey, string>> = {
  python: {
    debian: "sudo apt-get install python3 python3-venv",
    fedora: "sudo dnf install python3",
    macos: "brew install python@3.12",
    windows: "winget install Python.Python.3.12",
  },
  venv: {
    debian: "sudo apt-get install python3-venv",
    fedora: "sudo dnf install python3",
    macos: "brew install python@3.12",
    windows: "winget install Python.Python.3.12",
  },
};

export const WHAT_IS_MISSING: Record<Missing, string> = {
  python: 'Python 3.10 or later',
  venv: "Python's venv module",
};

/** This machine among the platforms the advice names (`osRelease`: /etc/os-release's text on Linux). */
export function platformKey(platform: string, osRelease: string | undefined): PlatformKey | undefined {
  if (platform === 'win32') return 'windows';
  if (platform === 'darwin') return 'macos';
  const ids = new Set<string>();
  for (const line of (osRelease ?? '').split('\n')) {
    const match = /^(ID|ID_LIKE)=(.*)$/.exec(line.trim());
    if (match) for (const id of match[2].replace(/"/g, '').split(/\s+/)) ids.add(id);
  }
  if (ids.has('debian') || ids.has('ubuntu')) return 'debian';
  if (ids.has('fedora') || ids.has('rhel') || ids.has('centos')) return 'fedora';
  return undefined;
}

/** "Debian/Ubuntu: sudo apt-get install python3-venv; Fedora: …", this machine's first. */
export function adviceText(fix: Partial<Record<PlatformKey, string>>, here: PlatformKey | undefined): string {
  const keys = (Object.keys(PLATFORM_NAMES) as PlatformKey[]).filter((key) => fix[key] !== undefined);
  keys.sort((a, b) => Number(b === here) - Number(a === here));
  return keys.map((key) => `${PLATFORM_NAMES[key]}: ${fix[key]}`).join('; ');
}

/** One line of `ghostfim setup --json` (engine/setup/install.py). */
export interface SetupEvent {
  step: string;
  event: 'start' | 'progress' | 'note' | 'done' | 'error';
  title?: string;
  message?: string;
  phase?: string;
  percent?: number;
  bytes?: number;
  total?: number;
  elapsed_s?: number;
  missing?: string;
  /** What is missing, in words ("a C/C++ compiler ..."). */
  what?: string;
  fix_text?: string;
  log?: string;
  ready?: boolean;
  server?: string | null;
  changed?: string[];
}

const EVENTS = new Set(['start', 'progress', 'note', 'done', 'error']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function parseSetupEvent(line: string): SetupEvent | undefined {
  const text = line.trim();
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (!isRecord(value) || typeof value.step !== 'string' || typeof value.event !== 'string') return undefined;
    if (!EVENTS.has(value.event)) return undefined;
    return value as unknown as SetupEvent;
  } catch {
    return undefined;
  }
}

/** "2:13" past a minute, "42 s" below. */
export function formatElapsed(seconds: number | undefined): string {
  const s = Math.max(0, Math.floor(seconds ?? 0));
  return s >= 60 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}` : `${s} s`;
}

function mib(bytes: number): string {
  return `${Math.round(bytes / 1048576)} MB`;
}

/**
 * The notification's line for an event: the build's phase and elapsed time, the download's
 * percentage, each step's start and end. Undefined for what only the log needs.
 */
export function progressMessage(event: SetupEvent): string | undefined {
  const title = event.title ?? event.step;
  if (event.step === 'setup') return undefined;
  switch (event.event) {
    case 'start':
      return `${title}: ${event.message ?? ''}`;
    case 'progress': {
      const parts = [`${title}: ${event.phase ?? 'working'}`];
      if (typeof event.percent === 'number') parts.push(` ${Math.floor(event.percent)}%`);
      if (typeof event.bytes === 'number' && typeof event.total === 'number') {
        parts.push(` (${mib(event.bytes)} of ${mib(event.total)})`);
      }
      parts.push(` · ${formatElapsed(event.elapsed_s)}`);
      return parts.join('');
    }
    case 'done':
      return `${title}: ${event.message ?? 'done'}`;
    case 'note':
    case 'error':
      return undefined;
  }
}

/** What was installed, kept in ManagedPaths.stateFile once the install is ready. */
export interface InstallState {
  /** sha256 of the wheel the install came from: another one in the extension means upgrade. */
  wheelSha256: string;
  wheel: string;
  extensionVersion: string;
  python: string;
  readyAt: string;
}

export function parseInstallState(text: string | undefined): InstallState | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (!isRecord(value)) return undefined;
    for (const key of ['wheelSha256', 'wheel', 'extensionVersion', 'python', 'readyAt']) {
      if (typeof value[key] !== 'string') return undefined;
    }
    return value as unknown as InstallState;
  } catch {
    return undefined;
  }
}

/**
 * `none`: nothing set up (or a set-up that never finished); `ready`: start it; `upgrade`: ready,
 * but from another wheel than the one this extension carries (the extension was updated), so
 * its ghostfim is installed again before it starts.
 */
export type ManagedStatus = 'none' | 'ready' | 'upgrade';

export function managedStatus(
  state: InstallState | undefined,
  serverExists: boolean,
  bundledSha256: string | undefined,
): ManagedStatus {
  if (state === undefined || !serverExists) return 'none';
  if (bundledSha256 !== undefined && state.wheelSha256 !== bundledSha256) return 'upgrade';
  return 'ready';
}

/** The bundled wheel among the extension's `server/` files: the newest version if several. */
export function bundledWheel(files: readonly string[]): string | undefined {
  const wheels = files.filter((name) => /^ghostfim-[^-]+-py3-none-any\.whl$/.test(name));
  const version = (name: string): number[] =>
    (/^ghostfim-([^-]+)-/.exec(name)?.[1] ?? '0').split('.').map((part) => Number.parseInt(part, 10) || 0);
  wheels.sort((a, b) => {
    const [va, vb] = [version(a), version(b)];
    for (let i = 0; i < Math.max(va.length, vb.length); i++) {
      const d = (va[i] ?? 0) - (vb[i] ?? 0);
      if (d !== 0) return d;
    }
    return 0;
  });
  return wheels.pop();
}

/** The environment of a set-up process: ours without what points Python at other code. */
export function setupEnv(base: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined && !key.startsWith('PYTHON')) env[key] = value;
  }
  env.PYTHONUNBUFFERED = '1';
  env.PIP_NO_INPUT = '1';
  env.PIP_DISABLE_PIP_VERSION_CHECK = '1';
  return env;
}
