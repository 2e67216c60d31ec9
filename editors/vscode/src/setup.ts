// The server the extension sets up by itself: a virtual environment in the extension's global
// storage with the ghostfim wheel the VSIX carries, made ready by `ghostfim setup --json`
// (llama.cpp built with this machine's flags, the default model fetched). Every process runs
// with its working directory in that storage, never in the workspace, and an untrusted
// workspace's Python is never run (setupPlan.ts decides which Python).

import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
  adviceText,
  bundledWheel,
  FIXES,
  type InstallState,
  managedPaths,
  type ManagedPaths,
  managedStatus,
  type ManagedStatus,
  type Missing,
  parseInstallState,
  parsePythonProbe,
  parseSetupEvent,
  platformKey,
  progressMessage,
  PYTHON_PROBE,
  type PythonCommand,
  pythonCandidates,
  type PythonFound,
  pythonIsRecent,
  type SetupEvent,
  setupEnv,
  WHAT_IS_MISSING,
} from './setupPlan';

export type SetupMode = 'install' | 'upgrade' | 'again';

/** A failed step, with what to install when that is the reason. */
export class SetupFailure extends Error {
  constructor(
    message: string,
    /** The commands that install what is missing, by platform. */
    readonly fix?: string,
    /** What is missing, e.g. "Python's venv module". */
    readonly what?: string,
  ) {
    super(message);
  }

  get advice(): string {
    return this.fix !== undefined ? ` To install ${this.what ?? 'it'}: ${this.fix}.` : '';
  }
}

class Cancelled extends Error {}

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function isFile(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isFile();
  } catch {
    return false;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/**
 * The Python extension's interpreter for the first workspace folder, if it is installed. Its
 * `environments` API first, then the older `settings.getExecutionDetails`.
 */
async function pythonExtensionInterpreter(log: vscode.LogOutputChannel): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension('ms-python.python');
  if (extension === undefined) return undefined;
  try {
    const api: unknown = extension.isActive ? extension.exports : await extension.activate();
    if (!isRecord(api)) return undefined;
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const environments = api.environments;
    if (isRecord(environments) && typeof environments.getActiveEnvironmentPath === 'function') {
      const active: unknown = (environments.getActiveEnvironmentPath as (r?: vscode.Uri) => unknown)(folder);
      if (typeof environments.resolveEnvironment === 'function') {
        const resolved: unknown = await (environments.resolveEnvironment as (e: unknown) => Promise<unknown>)(active);
        const uri = isRecord(resolved) && isRecord(resolved.executable) ? resolved.executable.uri : undefined;
        if (uri instanceof vscode.Uri) return uri.fsPath;
      }
      if (isRecord(active) && typeof active.path === 'string') return active.path;
    }
    const settings = api.settings;
    if (isRecord(settings) && typeof settings.getExecutionDetails === 'function') {
      const details: unknown = (settings.getExecutionDetails as (r?: vscode.Uri) => unknown)(folder);
      const command: unknown = isRecord(details) && Array.isArray(details.execCommand) ? (details.execCommand as unknown[])[0] : undefined;
      if (typeof command === 'string') return command;
    }
  } catch (error) {
    log.warn(`The Python extension did not say which interpreter it uses: ${String(error)}`);
  }
  return undefined;
}

export class ManagedServer {
  readonly paths: ManagedPaths;
  private readonly serverDir: string;
  private running: Promise<boolean> | undefined;
  private here = platformKey(process.platform, readText('/etc/os-release'));

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    /** Shown in the status bar while a set-up runs (undefined: it ended). */
    private readonly onStep: (message: string | undefined) => void,
  ) {
    this.paths = managedPaths(context.globalStorageUri.fsPath, process.platform);
    this.serverDir = vscode.Uri.joinPath(context.extensionUri, 'server').fsPath;
  }

  /** The wheel this extension carries (make vsix puts it in server/). */
  wheel(): string | undefined {
    let files: string[] = [];
    try {
      files = fs.readdirSync(this.serverDir);
    } catch {
      return undefined;
    }
    const name = bundledWheel(files);
    return name === undefined ? undefined : vscode.Uri.joinPath(vscode.Uri.file(this.serverDir), name).fsPath;
  }

  private wheelSha256(wheel: string | undefined): string | undefined {
    if (wheel === undefined) return undefined;
    try {
      return createHash('sha256').update(fs.readFileSync(wheel)).digest('hex');
    } catch {
      return undefined;
    }
  }

  state(): InstallState | undefined {
    return parseInstallState(readText(this.paths.stateFile));
  }

  status(): ManagedStatus {
    return managedStatus(this.state(), isFile(this.paths.server), this.wheelSha256(this.wheel()));
  }

  /** The server to start, when a set-up finished (an outdated one too: it still runs). */
  readyServer(): string | undefined {
    return this.status() === 'none' ? undefined : this.paths.server;
  }

  get busy(): boolean {
    return this.running !== undefined;
  }

  /**
   * Sets up (or upgrades, or reinstalls) the managed server in a cancellable notification.
   * Resolves true when it is ready; failures are shown with Retry, and also resolve false.
   */
  run(mode: SetupMode): Promise<boolean> {
    // One at a time: a second click joins the set-up in progress.
    this.running ??= this.runWithProgress(mode).finally(() => {
      this.running = undefined;
      this.onStep(undefined);
    });
    return this.running;
  }

  private async runWithProgress(mode: SetupMode): Promise<boolean> {
    const title =
      mode === 'upgrade' ? 'ghostfim: updating the server' : 'ghostfim: setting up the server';
    const started = Date.now();
    this.log.info(`${title} in ${this.paths.root} (${mode})`);
    try {
      await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: true },
        (progress, token) => this.install(mode, progress, token),
      );
    } catch (error) {
      if (error instanceof Cancelled) {
        this.log.warn('The set-up was cancelled.');
        void vscode.window
          .showInformationMessage('ghostfim: the set-up was cancelled.', 'Set up ghostfim')
          .then((choice) => (choice === 'Set up ghostfim' ? this.run(mode) : undefined));
        return false;
      }
      const failure = error instanceof SetupFailure ? error : new SetupFailure(String(error));
      this.log.error(`The set-up failed: ${failure.message}.${failure.advice}`);
      void this.offerRetry(mode, failure);
      return false;
    }
    this.log.info(`The server is ready (${Math.round((Date.now() - started) / 1000)} s): ${this.paths.server}`);
    return true;
  }

  private async offerRetry(mode: SetupMode, failure: SetupFailure): Promise<void> {
    const choice = await vscode.window.showErrorMessage(
      `ghostfim: the server could not be set up: ${failure.message}.${failure.advice}`,
      'Retry',
      'Show log',
    );
    if (choice === 'Retry') {
      if (await this.run(mode)) await vscode.commands.executeCommand('ghostfim.restartServer');
    } else if (choice === 'Show log') {
      this.log.show(true);
    }
  }

  private async install(
    mode: SetupMode,
    progress: vscode.Progress<{ message?: string; increment?: number }>,
    token: vscode.CancellationToken,
  ): Promise<void> {
    let reported = 0;
    const say = (message: string, percent?: number): void => {
      this.onStep(message);
      // The bar follows the download (the one step with a size); other steps name their phase.
      const increment = percent !== undefined && percent > reported ? percent - reported : undefined;
      if (increment !== undefined) reported = percent ?? reported;
      progress.report({ message, ...(increment !== undefined ? { increment } : {}) });
    };
    const wheel = this.wheel();
    if (wheel === undefined) {
      throw new SetupFailure(`this extension carries no ghostfim wheel in ${this.serverDir} (build it with make vsix)`);
    }
    await fs.promises.mkdir(this.paths.root, { recursive: true });
    await fs.promises.rm(this.paths.stateFile, { force: true });

    // A venv whose Python no longer runs (its base interpreter was upgraded or removed) is made
    // again, as one that was never made.
    const usable =
      mode !== 'again' &&
      isFile(this.paths.python) &&
      (await this.exec(this.paths.python, ['-I', '-c', 'pass'], token)).code === 0;
    if (!usable) {
      say('Finding Python 3.10 or later…');
      const python = await this.findPython(token);
      this.log.info(`Using Python ${python.found.version.join('.')} at ${python.found.executable} (${python.command.source})`);
      say(`Creating a virtual environment with Python ${python.found.version.join('.')}…`);
      await fs.promises.rm(this.paths.venv, { recursive: true, force: true });
      const made = await this.exec(python.command.command, [...python.command.args, '-I', '-m', 'venv', this.paths.venv], token);
      if (made.code !== 0) {
        const missing: Missing | undefined = /ensurepip|venv/i.test(made.output) ? 'venv' : undefined;
        throw this.failure(`creating the virtual environment failed (${this.lastLine(made.output)})`, missing);
      }
    }

    say('Installing ghostfim…');
    const pip = await this.exec(
      this.paths.python,
      ['-I', '-m', 'pip', 'install', '--no-deps', '--force-reinstall', '--no-input', '--disable-pip-version-check', wheel],
      token,
    );
    if (pip.code !== 0) throw new SetupFailure(`installing the ghostfim wheel failed (${this.lastLine(pip.output)})`);

    // The rest (dependencies, llama.cpp with this machine's flags, the model) is ghostfim's own
    // set-up (`ghostfim setup --json`), which reports each step as a line of JSON. Run as its
    // module: the `ghostfim` command's other tools import packages not installed yet.
    let failed: SetupEvent | undefined;
    let finished: SetupEvent | undefined;
    const setup = await this.exec(this.paths.python, ['-I', '-m', 'ghostfim.engine.setup.install', '--json'], token, (line) => {
      const event = parseSetupEvent(line);
      if (event === undefined) return false;
      this.log.info(`setup: ${line}`);
      if (event.step === 'setup' && event.event === 'done') finished = event;
      if (event.event === 'error' && event.step !== 'setup') failed = event;
      const message = progressMessage(event);
      if (message !== undefined) say(message, event.step === 'model' ? event.percent : undefined);
      return true;
    });
    if (setup.code !== 0 || finished?.ready !== true) {
      const why = failed?.message ?? `ghostfim setup exited with ${setup.code ?? setup.signal}: ${this.lastLine(setup.output)}`;
      throw new SetupFailure(why, failed?.fix_text, failed?.what);
    }

    const state: InstallState = {
      wheelSha256: this.wheelSha256(wheel) ?? '',
      wheel,
      extensionVersion: this.extensionVersion(),
      python: this.paths.python,
      readyAt: new Date().toISOString(),
    };
    await fs.promises.writeFile(this.paths.stateFile, JSON.stringify(state, null, 2));
    say('Starting the server…');
  }

  private extensionVersion(): string {
    const manifest: unknown = this.context.extension.packageJSON;
    return isRecord(manifest) && typeof manifest.version === 'string' ? manifest.version : '';
  }

  private failure(message: string, missing: Missing | undefined): SetupFailure {
    if (missing === undefined) return new SetupFailure(message);
    return new SetupFailure(
      message,
      adviceText(FIXES[missing], this.here),
      WHAT_IS_MISSING[missing],
    );
  }

  private lastLine(output: string): string {
    const lines = output.trim().split(/\r?\n/).filter((line) => line.trim() !== '');
    return lines.pop() ?? 'no output';
  }

  private async findPython(token: vscode.CancellationToken): Promise<{ command: PythonCommand; found: PythonFound }> {
    const trusted = vscode.workspace.isTrusted;
    const candidates = pythonCandidates({
      platform: process.platform,
      pathEnv: process.env.PATH,
      pathExtEnv: process.env.PATHEXT,
      // Only asked in a trusted workspace: it is often the workspace's own .venv.
      ...(trusted ? { pythonExtension: await pythonExtensionInterpreter(this.log) } : {}),
      workspaceTrusted: trusted,
      isFile,
    });
    let withoutVenv: PythonFound | undefined;
    const tried: string[] = [];
    for (const candidate of candidates) {
      const probe = await this.exec(candidate.command, [...candidate.args, '-I', '-c', PYTHON_PROBE], token, () => true);
      const found = probe.code === 0 ? parsePythonProbe(probe.output) : undefined;
      tried.push(`${candidate.command}${found ? ` (${found.version.join('.')})` : ''}`);
      if (found === undefined || !pythonIsRecent(found)) continue;
      if (!found.venv) {
        withoutVenv ??= found;
        continue;
      }
      return { command: candidate, found };
    }
    this.log.warn(`Pythons tried: ${tried.join(', ') || 'none on PATH'}`);
    if (withoutVenv !== undefined) {
      throw this.failure(`Python ${withoutVenv.version.join('.')} at ${withoutVenv.executable} cannot make a virtual environment`, 'venv');
    }
    throw this.failure('no Python 3.10 or later was found on PATH', 'python');
  }

  /**
   * Runs a process in the storage folder; stdout and stderr go to the log line by line, except
   * the lines `onStdout` takes. A cancelled token stops it and its children.
   */
  private exec(
    command: string,
    args: string[],
    token: vscode.CancellationToken,
    onStdout?: (line: string) => boolean,
  ): Promise<RunResult> {
    if (token.isCancellationRequested) return Promise.reject(new Cancelled());
    this.log.info(`$ ${command} ${args.map((a) => (a.includes('\n') ? '<script>' : a)).join(' ')}`);
    return new Promise((resolve, reject) => {
      let child: ChildProcess;
      try {
        child = spawn(command, args, {
          cwd: this.paths.root,
          env: setupEnv(process.env),
          stdio: ['ignore', 'pipe', 'pipe'],
          // Its own process group, so that cancelling stops pip's build processes too.
          detached: process.platform !== 'win32',
          windowsHide: true,
        });
      } catch (error) {
        resolve({ code: -1, signal: null, output: String(error) });
        return;
      }
      const tail: string[] = [];
      let settled = false;
      const finish = (result: RunResult | Cancelled): void => {
        if (settled) return;
        settled = true;
        cancel.dispose();
        if (result instanceof Cancelled) reject(result);
        else resolve(result);
      };
      const lines = (stream: NodeJS.ReadableStream | null, isStdout: boolean): void => {
        let pending = '';
        stream?.setEncoding('utf8');
        stream?.on('data', (chunk: string) => {
          pending += chunk;
          const parts = pending.split(/\r?\n/);
          pending = parts.pop() ?? '';
          for (const line of parts) handle(line, isStdout);
        });
        stream?.on('end', () => {
          if (pending !== '') handle(pending, isStdout);
        });
      };
      const handle = (line: string, isStdout: boolean): void => {
        tail.push(line);
        if (tail.length > 40) tail.shift();
        if (isStdout && onStdout?.(line) === true) return;
        if (line.trim() !== '') this.log.info(`  ${line}`);
      };
      lines(child.stdout, true);
      lines(child.stderr, false);
      const cancel = token.onCancellationRequested(() => {
        this.log.warn(`Stopping ${command}`);
        try {
          if (process.platform === 'win32') {
            spawn('taskkill', ['/pid', String(child.pid), '/T', '/F'], { windowsHide: true });
          } else if (child.pid !== undefined) {
            process.kill(-child.pid, 'SIGTERM');
          }
        } catch (error) {
          this.log.debug(`Stopping: ${String(error)}`);
        }
      });
      // A command that cannot start (ENOENT) reports an error and may never close.
      child.on('error', (error) => {
        tail.push(String(error));
        finish({ code: -1, signal: null, output: tail.join('\n') });
      });
      child.on('close', (code, signal) => {
        finish(token.isCancellationRequested ? new Cancelled() : { code, signal, output: tail.join('\n') });
      });
    });
  }
}
