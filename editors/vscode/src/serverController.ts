// Starts, restarts and stops the server process, and routes what it reports to the status bar
// and the ghost text store. Lifecycle operations are queued so a restart requested while one is
// in progress cannot leave two servers running.

import * as vscode from 'vscode';
import { type LanguageClient, State } from 'vscode-languageclient/node';
import type { AcceptSignals } from './acceptSignals';
import { createLanguageClient, resolveLaunchHere } from './client';
import type { GhostTextSync } from './ghostTextSync';
import { isCompletionStats, isServerStatus, Methods, type ServerStatus } from './protocol';
import { SECTION } from './settings';
import type { ManagedServer, SetupMode } from './setup';
import type { StatusBar } from './statusBar';

const STOP_TIMEOUT_MS = 2000;
const STATUS_TIMEOUT_MS = 2000;

export class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private lastState: ServerStatus['state'] | undefined;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly statusBar: StatusBar,
    private readonly ghostText: GhostTextSync,
    private readonly signals: AcceptSignals,
    /** Runs the "switch model size" command, offered when a model fails to load. */
    private readonly switchModelSize: () => Thenable<unknown>,
    /** The server the extension sets up in its own storage when none is found. */
    private readonly managed: ManagedServer,
  ) {}

  /** The client, when one exists (it may be starting or stopped). */
  get current(): LanguageClient | undefined {
    return this.client;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.startNow());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.stopNow();
      await this.startNow();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopNow());
  }

  /**
   * Asks the server for ghostfim/status. `adoptHistory` replaces the local latency window with
   * the server's recent stats (right after a start, so the status bar reflects that process).
   */
  async refreshStatus(adoptHistory = false): Promise<ServerStatus | undefined> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) return undefined;
    const cancel = new vscode.CancellationTokenSource();
    const timer = setTimeout(() => cancel.cancel(), STATUS_TIMEOUT_MS);
    try {
      const status: unknown = await client.sendRequest(Methods.status, undefined, cancel.token);
      if (!isServerStatus(status)) return undefined;
      if (adoptHistory && Array.isArray(status.recent)) {
        this.statusBar.latency.reset(status.recent.filter(isCompletionStats));
      }
      this.onServerStatus(status);
      return status;
    } catch (error) {
      // The protocol calls ghostfim/* optional: a server without it is still a working server.
      this.log.debug(`ghostfim/status failed: ${String(error)}`);
      return undefined;
    } finally {
      clearTimeout(timer);
      cancel.dispose();
    }
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(task).catch((error: unknown) => {
      this.log.error(`Server lifecycle operation failed: ${String(error)}`);
    });
    return this.queue;
  }

  /**
   * Sets up the extension's own server (a venv in its storage: setup.ts), then starts whichever
   * server the settings now lead to. `again` reinstalls it from scratch.
   */
  async setUp(mode: SetupMode): Promise<void> {
    if (mode === 'again' && this.client !== undefined) await this.stop(); // its files are replaced
    this.statusBar.setPhase('settingUp', 'Setting up the ghostfim server…');
    const ready = await this.managed.run(mode);
    if (ready) {
      await this.restart();
    } else if (this.client === undefined) {
      this.statusBar.setPhase('notFound', 'The ghostfim server is not set up.');
    }
  }

  /** Whether the server the settings lead to is the extension's own, set up from an older wheel. */
  needsUpgrade(): boolean {
    if (this.managed.status() !== 'upgrade') return false;
    const resolution = resolveLaunchHere(this.managed.readyServer());
    return resolution.ok && resolution.launch.source === 'managed';
  }

  private async startNow(): Promise<void> {
    if (this.managed.busy) return; // the set-up starts the server when it is done
    const resolution = resolveLaunchHere(this.managed.readyServer());
    if (!resolution.ok) {
      this.log.error(`Cannot start the server: ${resolution.reason}. Looked for: ${resolution.searched.join(', ') || '(nothing)'}`);
      this.statusBar.setPhase('notFound', `${resolution.reason}.`);
      const configured = vscode.workspace.getConfiguration(SECTION).get<string>('serverPath', '');
      if (typeof configured === 'string' && configured.trim() !== '') {
        void this.offerServerPathFix(resolution.reason);
      } else {
        void this.offerSetup();
      }
      return;
    }
    const { launch } = resolution;
    this.log.info(`Starting ${launch.command} ${launch.args.join(' ')} (found via ${launch.source})`);
    const client = createLanguageClient(launch, {
      log: this.log,
      onWorkDoneProgress: (token, value) => {
        if (value.kind === 'end') {
          this.statusBar.setProgress(token, undefined);
        } else {
          const title = value.kind === 'begin' ? value.title : undefined;
          this.statusBar.setProgress(token, {
            ...(title !== undefined ? { title } : {}),
            ...(value.message !== undefined ? { message: value.message } : {}),
            ...(value.percentage !== undefined ? { percentage: value.percentage } : {}),
          });
        }
      },
      onGaveUp: (message) => {
        this.statusBar.setPhase('stopped', message);
        void this.offerRestart(message);
      },
      onAcceptCommand: (args) => this.signals.commandRan(args),
    });
    this.client = client;
    this.lastState = undefined;

    client.onDidChangeState((event) => {
      // Events of a client being replaced say nothing about the current one.
      if (client !== this.client) return;
      if (event.newState === State.Running) {
        this.ghostText.reset();
        this.signals.reset();
        this.statusBar.setPhase('running');
        void this.refreshStatus(true);
      } else if (event.newState === State.Starting) {
        this.statusBar.setPhase('starting');
      }
      // Stopped is reported by onGaveUp or by a failed start, with the reason.
    });
    client.onNotification(Methods.ghostText, (params: unknown) => this.ghostText.handleNotification(params));
    client.onNotification(Methods.stats, (params: unknown) => {
      if (isCompletionStats(params)) this.statusBar.addStats(params);
    });
    client.onNotification(Methods.statusChanged, (params: unknown) => {
      if (isServerStatus(params)) this.onServerStatus(params);
    });

    this.statusBar.setPhase('starting');
    try {
      await client.start();
    } catch (error) {
      // languageclient has already shown an error message of its own; the status bar says the rest.
      const message = `The ghostfim server failed to start: ${error instanceof Error ? error.message : String(error)}`;
      this.log.error(message);
      if (client === this.client) this.statusBar.setPhase('stopped', message);
    }
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) return;
    try {
      // dispose() stops a running (or starting) client and frees its listeners.
      await client.dispose(STOP_TIMEOUT_MS);
    } catch (error) {
      // Also thrown for a client whose start failed: there is no process left to stop then.
      this.log.debug(`Stopping the server: ${String(error)}`);
    }
    this.ghostText.reset();
    this.signals.reset();
  }

  private onServerStatus(status: ServerStatus): void {
    this.statusBar.setServerStatus(status);
    if (status.state === 'error' && this.lastState !== 'error') {
      const reason = status.error ?? 'the model failed to load';
      this.log.error(`Server error: ${reason}`);
      void vscode.window
        .showWarningMessage(`ghostfim: ${reason}`, 'Switch model size', 'Show log')
        .then((choice) => {
          if (choice === 'Switch model size') return this.switchModelSize();
          if (choice === 'Show log') this.log.show(true);
          return undefined;
        });
    }
    this.lastState = status.state;
  }

  /** No server anywhere and none set up: offer to set one up, or to pick one. */
  private async offerSetup(): Promise<void> {
    const choice = await vscode.window.showInformationMessage(
      'ghostfim needs its server: a Python package that runs the model with llama.cpp. Set it up ' +
        "now in the extension's own storage (needs Python 3.10+; downloads about 500 MB), or " +
        'choose a ghostfim you installed.',
      'Set up ghostfim',
      'Choose a server…',
    );
    if (choice === 'Set up ghostfim') {
      await this.setUp('install');
    } else if (choice === 'Choose a server…') {
      await this.chooseServer();
    }
  }

  /** A file picker for the `ghostfim` executable; the choice becomes ghostfim.serverPath. */
  async chooseServer(): Promise<void> {
    const picked = await vscode.window.showOpenDialog({
      title: 'The ghostfim executable (e.g. a virtual environment\'s bin/ghostfim)',
      openLabel: 'Use this server',
      canSelectFiles: true,
      canSelectFolders: false,
      canSelectMany: false,
    });
    const file = picked?.[0];
    if (file === undefined) return;
    // A machine setting: in a remote window VS Code writes it to the remote machine's settings.
    // Changing it restarts the server (extension.ts).
    await vscode.workspace
      .getConfiguration(SECTION)
      .update('serverPath', file.fsPath, vscode.ConfigurationTarget.Global);
  }

  private async offerServerPathFix(reason: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(
      `ghostfim: ${reason}. Install ghostfim into the workspace's virtual environment or onto PATH, or set ghostfim.serverPath.`,
      'Open settings',
      'Show log',
    );
    if (choice === 'Open settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'ghostfim.serverPath');
    } else if (choice === 'Show log') {
      this.log.show(true);
    }
  }

  private async offerRestart(message: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(`ghostfim: ${message}`, 'Restart server', 'Show log');
    if (choice === 'Restart server') {
      await this.restart();
    } else if (choice === 'Show log') {
      this.log.show(true);
    }
  }

  async dispose(): Promise<void> {
    await this.stop();
  }
}
