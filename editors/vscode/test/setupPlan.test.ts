import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  adviceText,
  bundledWheel,
  FIXES,
  formatElapsed,
  type InstallState,
  managedPaths,
  managedStatus,
  parseInstallState,
  parsePythonProbe,
  parseSetupEvent,
  platformKey,
  progressMessage,
  pythonCandidates,
  type PythonSearch,
  pythonIsRecent,
  setupEnv,
} from '../src/setupPlan';

const packageRoot = path.resolve(__dirname, '..', '..');

function linux(files: string[], overrides: Partial<PythonSearch> = {}): PythonSearch {
  return {
    platform: 'linux',
    pathEnv: '/usr/local/bin:/usr/bin',
    workspaceTrusted: true,
    isFile: (candidate) => files.includes(candidate),
    ...overrides,
  };
}

describe('managedPaths', () => {
  it('keeps the venv and its server in the storage folder', () => {
    assert.deepEqual(managedPaths('/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim', 'linux'), {
      root: '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim',
      venv: '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim/venv',
      python: '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim/venv/bin/python',
      server: '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim/venv/bin/ghostfim',
      stateFile: '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim/install.json',
    });
  });

  it('uses Scripts\\ and .exe on Windows', () => {
    const paths = managedPaths('C:\\Users\\ann\\AppData\\Roaming\\Code\\User\\globalStorage\\ghostfim.ghostfim', 'win32');
    assert.equal(paths.python, 'C:\\Users\\ann\\AppData\\Roaming\\Code\\User\\globalStorage\\ghostfim.ghostfim\\venv\\Scripts\\python.exe');
    assert.equal(paths.server, 'C:\\Users\\ann\\AppData\\Roaming\\Code\\User\\globalStorage\\ghostfim.ghostfim\\venv\\Scripts\\ghostfim.exe');
  });
});

describe('pythonCandidates', () => {
  it("puts the Python extension's interpreter first in a trusted workspace", () => {
    const found = pythonCandidates(linux(['/usr/bin/python3'], { pythonExtension: '/work/proj/.venv/bin/python' }));
    assert.deepEqual(found, [
      { command: '/work/proj/.venv/bin/python', args: [], source: 'python-extension' },
      { command: '/usr/bin/python3', args: [], source: 'path' },
    ]);
  });

  it("never runs an untrusted workspace's interpreter", () => {
    const found = pythonCandidates(
      linux(['/usr/bin/python3'], { pythonExtension: '/work/proj/.venv/bin/python', workspaceTrusted: false }),
    );
    assert.deepEqual(found, [{ command: '/usr/bin/python3', args: [], source: 'path' }]);
  });

  it('skips relative PATH entries (folders of the workspace)', () => {
    const found = pythonCandidates(linux(['bin/python3', '/usr/bin/python'], { pathEnv: 'bin:.:/usr/bin' }));
    assert.deepEqual(found, [{ command: '/usr/bin/python', args: [], source: 'path' }]);
  });

  it('tries the py launcher first on Windows', () => {
    const found = pythonCandidates({
      platform: 'win32',
      pathEnv: 'C:\\Windows;C:\\Users\\ann\\AppData\\Local\\Microsoft\\WindowsApps',
      pathExtEnv: '.COM;.EXE',
      workspaceTrusted: true,
      isFile: (candidate) =>
        ['C:\\Windows\\py.exe', 'C:\\Users\\ann\\AppData\\Local\\Microsoft\\WindowsApps\\python.exe'].includes(candidate),
    });
    assert.deepEqual(found, [
      { command: 'C:\\Windows\\py.exe', args: ['-3'], source: 'path' },
      { command: 'C:\\Users\\ann\\AppData\\Local\\Microsoft\\WindowsApps\\python.exe', args: [], source: 'path' },
    ]);
  });
});

describe('the Python probe', () => {
  it('reads the version and whether venv works', () => {
    const found = parsePythonProbe('{"version": [3, 11, 2], "executable": "/usr/bin/python3", "venv": true}\n');
    assert.deepEqual(found, { version: [3, 11, 2], executable: '/usr/bin/python3', venv: true });
    assert.ok(found && pythonIsRecent(found));
    assert.ok(!pythonIsRecent({ version: [3, 9, 18], executable: 'x', venv: true }));
    assert.ok(pythonIsRecent({ version: [4, 0, 0], executable: 'x', venv: true }));
    assert.equal(parsePythonProbe('Python was not found; run without arguments to install from the Microsoft Store'), undefined);
  });
});

describe('advice', () => {
  it("names this machine's command first", () => {
    assert.equal(platformKey('linux', 'PRETTY_NAME="Debian GNU/Linux 12"\nID=debian\n'), 'debian');
    assert.equal(platformKey('linux', 'ID=fedora\n'), 'fedora');
    assert.equal(platformKey('linux', 'ID=arch\n'), undefined);
    assert.equal(platformKey('darwin', undefined), 'macos');
    const text = adviceText(FIXES.venv, 'debian');
    assert.ok(text.startsWith('Debian/Ubuntu: sudo apt-get install python3-venv; '), text);
    for (const name of ['Fedora: ', 'macOS: ', 'Windows: ']) assert.ok(text.includes(name), text);
    assert.ok(adviceText(FIXES.python, 'windows').startsWith('Windows: winget install Python.Python.3.12'));
  });

  it('is what `ghostfim setup` says (engine/setup/platforms.py)', () => {
    const install = readFileSync(path.resolve(packageRoot, '..', '..', 'engine', 'setup', 'platforms.py'), 'utf8');
    for (const fix of Object.values(FIXES)) {
      for (const command of Object.values(fix)) assert.ok(install.includes(JSON.stringify(command)), command);
    }
  });
});

describe('ghostfim setup --json', () => {
  it('parses its lines and ignores anything else', () => {
    assert.deepEqual(parseSetupEvent('{"step": "model", "event": "progress", "percent": 12.5}'), {
      step: 'model',
      event: 'progress',
      percent: 12.5,
    });
    assert.equal(parseSetupEvent('Collecting numpy'), undefined);
    assert.equal(parseSetupEvent('{"step": "model"}'), undefined);
    assert.equal(parseSetupEvent('{"step": "model", "event": "exploded"}'), undefined);
    assert.equal(parseSetupEvent('{not json'), undefined);
  });

  it("shows the build's phase with its time and the download's percentage", () => {
    assert.equal(
      progressMessage({ step: 'llama', event: 'progress', title: 'llama.cpp', phase: 'compiling', percent: 45.6, elapsed_s: 133 }),
      'llama.cpp: compiling 45% · 2:13',
    );
    assert.equal(
      progressMessage({
        step: 'model',
        event: 'progress',
        title: 'model',
        phase: 'downloading',
        percent: 42.1,
        bytes: 206_000_000,
        total: 491_400_064,
        elapsed_s: 12,
      }),
      'model: downloading 42% (196 MB of 469 MB) · 12 s',
    );
    assert.equal(progressMessage({ step: 'llama', event: 'start', title: 'llama.cpp', message: 'installing llama-cpp-python 0.3.36' }), 'llama.cpp: installing llama-cpp-python 0.3.36');
    assert.equal(progressMessage({ step: 'setup', event: 'done', message: 'ready' }), undefined);
    assert.equal(progressMessage({ step: 'llama', event: 'note', message: 'no cmake' }), undefined);
    assert.equal(formatElapsed(59.9), '59 s');
  });
});

describe('the managed install', () => {
  const state: InstallState = {
    wheelSha256: 'abc',
    wheel: '/ext/server/ghostfim-0.1.0-py3-none-any.whl',
    extensionVersion: '0.1.0',
    python: '/storage/venv/bin/python',
    readyAt: '2026-01-01T00:00:00Z',
  };

  it('is ready once set up, and needs an upgrade when the extension carries another wheel', () => {
    assert.equal(managedStatus(undefined, true, 'abc'), 'none');
    assert.equal(managedStatus(state, false, 'abc'), 'none');
    assert.equal(managedStatus(state, true, 'abc'), 'ready');
    assert.equal(managedStatus(state, true, 'def'), 'upgrade');
    assert.equal(managedStatus(state, true, undefined), 'ready');
  });

  it('reads its state file, refusing anything else', () => {
    assert.deepEqual(parseInstallState(JSON.stringify(state)), state);
    assert.equal(parseInstallState('{"wheelSha256": 3}'), undefined);
    assert.equal(parseInstallState('not json'), undefined);
    assert.equal(parseInstallState(undefined), undefined);
  });

  it('finds the bundled wheel, the newest of several', () => {
    assert.equal(bundledWheel(['README.md', 'ghostfim-0.1.0-py3-none-any.whl']), 'ghostfim-0.1.0-py3-none-any.whl');
    assert.equal(
      bundledWheel(['ghostfim-0.9.0-py3-none-any.whl', 'ghostfim-0.10.0-py3-none-any.whl', 'other-1.0-py3-none-any.whl']),
      'ghostfim-0.10.0-py3-none-any.whl',
    );
    assert.equal(bundledWheel([]), undefined);
  });

  it("runs its processes without the user's Python variables", () => {
    const env = setupEnv({ PATH: '/usr/bin', PYTHONPATH: '/evil', PYTHONSTARTUP: '/evil.py', HOME: '/home/ann', GONE: undefined });
    assert.deepEqual(env, {
      PATH: '/usr/bin',
      HOME: '/home/ann',
      PYTHONUNBUFFERED: '1',
      PIP_NO_INPUT: '1',
      PIP_DISABLE_PIP_VERSION_CHECK: '1',
    });
  });
});
