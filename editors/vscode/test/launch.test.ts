import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { absoluteEntriesOnly, resolveServerLaunch } from '../src/launch';
import { type ExecutableSearch, expandSettingPath, findServerExecutable } from '../src/serverPath';

function posix(files: string[], overrides: Partial<ExecutableSearch> = {}): ExecutableSearch {
  return {
    platform: 'linux',
    pathEnv: '/usr/local/bin:/usr/bin',
    homeDir: '/home/ann',
    workspaceFolders: ['/work/proj'],
    workspaceTrusted: true,
    isFile: (candidate) => files.includes(candidate),
    ...overrides,
  };
}

function windows(files: string[], overrides: Partial<ExecutableSearch> = {}): ExecutableSearch {
  return {
    platform: 'win32',
    pathEnv: 'C:\\Python312\\Scripts;C:\\Windows',
    pathExtEnv: '.COM;.EXE;.BAT',
    homeDir: 'C:\\Users\\ann',
    workspaceFolders: ['C:\\work\\proj'],
    workspaceTrusted: true,
    isFile: (candidate) => files.includes(candidate),
    ...overrides,
  };
}

describe('findServerExecutable', () => {
  it('prefers the workspace .venv over PATH', () => {
    const search = posix(['/work/proj/.venv/bin/ghostfim', '/usr/bin/ghostfim']);
    assert.deepEqual(findServerExecutable('', search), {
      found: true,
      path: '/work/proj/.venv/bin/ghostfim',
      source: 'venv',
    });
  });

  it('finds venv/ as well as .venv/', () => {
    const search = posix(['/work/proj/venv/bin/ghostfim']);
    const lookup = findServerExecutable('', search);
    assert.ok(lookup.found);
    assert.equal(lookup.path, '/work/proj/venv/bin/ghostfim');
  });

  it('falls back to PATH, in PATH order', () => {
    const lookup = findServerExecutable('', posix(['/usr/bin/ghostfim', '/usr/local/bin/ghostfim']));
    assert.deepEqual(lookup, { found: true, path: '/usr/local/bin/ghostfim', source: 'path' });
  });

  it('skips the virtual environment of an untrusted workspace', () => {
    const search = posix(['/work/proj/.venv/bin/ghostfim', '/usr/bin/ghostfim'], { workspaceTrusted: false });
    assert.deepEqual(findServerExecutable('', search), { found: true, path: '/usr/bin/ghostfim', source: 'path' });
  });

  it("runs no file of an untrusted workspace, even when the user's own setting names it", () => {
    const inside = '/work/proj/tools/ghostfim';
    const untrusted = posix([inside, '/usr/bin/ghostfim'], { workspaceTrusted: false });
    for (const setting of ['${workspaceFolder}/tools/ghostfim', 'tools/ghostfim', inside]) {
      const lookup = findServerExecutable(setting, untrusted);
      assert.ok(!lookup.found && lookup.refused !== undefined, setting);
    }
    const trusted = findServerExecutable('tools/ghostfim', posix([inside]));
    assert.deepEqual(trusted, { found: true, path: inside, source: 'setting' });
    const outside = findServerExecutable('/usr/bin/ghostfim', untrusted);
    assert.ok(outside.found);
    const reason = resolveServerLaunch({ serverPath: 'tools/ghostfim', serverArgs: [] }, untrusted, {});
    assert.ok(!reason.ok && reason.reason.includes('untrusted workspace'));
  });

  it('never looks in a relative PATH entry', () => {
    const search = posix(['bin/ghostfim', '/usr/bin/ghostfim'], { pathEnv: 'bin:.:/usr/bin' });
    assert.deepEqual(findServerExecutable('', search), { found: true, path: '/usr/bin/ghostfim', source: 'path' });
  });

  it('takes the server the extension set up only when nothing else is there', () => {
    const managed = '/home/ann/.config/Code/User/globalStorage/ghostfim.ghostfim/venv/bin/ghostfim';
    assert.deepEqual(findServerExecutable('', posix([managed], { managed })), { found: true, path: managed, source: 'managed' });
    const onPath = findServerExecutable('', posix([managed, '/usr/bin/ghostfim'], { managed }));
    assert.deepEqual(onPath, { found: true, path: '/usr/bin/ghostfim', source: 'path' });
    const configured = findServerExecutable('/opt/ghostfim', posix([managed], { managed }));
    assert.ok(!configured.found, 'a configured path that is missing is reported, not replaced');
    const missing = findServerExecutable('', posix([], { managed }));
    assert.ok(!missing.found && missing.searched.includes(managed));
  });

  it('reports what it searched when nothing is there', () => {
    const lookup = findServerExecutable('', posix([]));
    assert.ok(!lookup.found);
    assert.ok(lookup.searched.includes('/work/proj/.venv/bin/ghostfim'));
    assert.ok(lookup.searched.includes('/usr/bin/ghostfim'));
  });

  it('uses only the configured path when one is set', () => {
    const files = ['/opt/ghostfim/bin/ghostfim', '/usr/bin/ghostfim'];
    assert.deepEqual(findServerExecutable('/opt/ghostfim/bin/ghostfim', posix(files)), {
      found: true,
      path: '/opt/ghostfim/bin/ghostfim',
      source: 'setting',
    });
    const missing = findServerExecutable('/nope/ghostfim', posix(files));
    assert.deepEqual(missing, { found: false, searched: ['/nope/ghostfim'] });
  });

  it('expands ~ and ${workspaceFolder}, and resolves relative paths from the workspace', () => {
    const files = ['/home/ann/bin/ghostfim', '/work/proj/tools/ghostfim'];
    const home = findServerExecutable('~/bin/ghostfim', posix(files));
    assert.ok(home.found && home.path === '/home/ann/bin/ghostfim');
    const folder = findServerExecutable('${workspaceFolder}/tools/ghostfim', posix(files));
    assert.ok(folder.found && folder.path === '/work/proj/tools/ghostfim');
    const relative = findServerExecutable('tools/ghostfim', posix(files));
    assert.ok(relative.found && relative.path === '/work/proj/tools/ghostfim');
  });

  it('looks a bare configured name up on PATH', () => {
    const lookup = findServerExecutable('ghostfim-dev', posix(['/usr/bin/ghostfim-dev']));
    assert.deepEqual(lookup, { found: true, path: '/usr/bin/ghostfim-dev', source: 'setting' });
  });

  it('uses Scripts\\ghostfim.exe and PATHEXT on Windows', () => {
    const venv = findServerExecutable('', windows(['C:\\work\\proj\\.venv\\Scripts\\ghostfim.exe']));
    assert.deepEqual(venv, { found: true, path: 'C:\\work\\proj\\.venv\\Scripts\\ghostfim.exe', source: 'venv' });
    const onPath = findServerExecutable('', windows(['C:\\Python312\\Scripts\\ghostfim.exe']));
    assert.deepEqual(onPath, { found: true, path: 'C:\\Python312\\Scripts\\ghostfim.exe', source: 'path' });
  });

  it('expands ~\\ on Windows', () => {
    assert.equal(expandSettingPath('~\\bin\\ghostfim.exe', windows([])), 'C:\\Users\\ann\\bin\\ghostfim.exe');
  });
});

describe('resolveServerLaunch', () => {
  const env = { PATH: '/usr/bin', HOME: '/home/ann', UNSET: undefined };

  it('runs `<executable> serve <serverArgs>` with the inherited environment', () => {
    const result = resolveServerLaunch(
      { serverPath: '', serverArgs: ['--log-level', 'debug'] },
      posix(['/usr/bin/ghostfim']),
      env,
    );
    assert.ok(result.ok);
    assert.equal(result.launch.command, '/usr/bin/ghostfim');
    assert.deepEqual(result.launch.args, ['serve', '--log-level', 'debug']);
    assert.equal(result.launch.env.PATH, '/usr/bin');
    assert.equal(result.launch.env.PYTHONUNBUFFERED, '1');
    assert.ok(!('UNSET' in result.launch.env));
    assert.equal(result.launch.source, 'path');
  });

  it("keeps the workspace off the server's import path", () => {
    const search = posix(['/usr/bin/ghostfim']);
    const relative = resolveServerLaunch(
      { serverPath: '', serverArgs: [] },
      search,
      { ...env, PYTHONPATH: ':/opt/lib:.:src:/home/ann/py' },
    );
    assert.ok(relative.ok);
    assert.equal(relative.launch.env.PYTHONPATH, '/opt/lib:/home/ann/py');
    assert.equal(relative.launch.env.PYTHONSAFEPATH, '1');
    const empty = resolveServerLaunch({ serverPath: '', serverArgs: [] }, search, {
      ...env,
      PYTHONPATH: ':',
    });
    assert.ok(empty.ok);
    assert.ok(!('PYTHONPATH' in empty.launch.env));
    assert.equal(absoluteEntriesOnly('C:\\py;lib;\\\\srv\\share', 'win32'), 'C:\\py;\\\\srv\\share');
  });

  it('ignores serverArgs that are not a list of strings', () => {
    const search = posix(['/usr/bin/ghostfim']);
    const notAList = resolveServerLaunch({ serverPath: undefined, serverArgs: '--tcp' }, search, env);
    assert.ok(notAList.ok);
    assert.deepEqual(notAList.launch.args, ['serve']);
    const mixed = resolveServerLaunch({ serverPath: 42, serverArgs: ['-v', 3, null] }, search, env);
    assert.ok(mixed.ok);
    assert.deepEqual(mixed.launch.args, ['serve', '-v']);
  });

  it('explains a missing server, naming the setting when it was set', () => {
    const unset = resolveServerLaunch({ serverPath: '', serverArgs: [] }, posix([]), env);
    assert.ok(!unset.ok);
    assert.match(unset.reason, /not found/);
    const set = resolveServerLaunch({ serverPath: '/opt/x/ghostfim', serverArgs: [] }, posix([]), env);
    assert.ok(!set.ok);
    assert.match(set.reason, /ghostfim\.serverPath/);
    assert.deepEqual(set.searched, ['/opt/x/ghostfim']);
  });
});
