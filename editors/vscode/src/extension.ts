// Entry point: creates the log, status bar, ghost text sync, accept signals, the server the
// extension sets up itself and the server controller, registers the inline suggestion provider
// and the commands, and stops the server on deactivation.

import * as vscode from 'vscode';
import { AcceptSignals } from './acceptSignals';
import { DOCUMENT_SELECTOR } from './client';
import { CommandIds, showStatus, switchModelSize, toggle } from './commands';
import { GhostTextSync } from './ghostTextSync';
import { InlineProvider } from './inlineProvider';
import { ServerController } from './serverController';
import { LAUNCH_SETTING_KEYS, SECTION } from './settings';
import { ManagedServer } from './setup';
import { StatusBar } from './statusBar';

let controller: ServerController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('ghostfim', { log: true });
  const statusBar = new StatusBar(CommandIds.showStatus);
  const ghostText = new GhostTextSync(() => controller?.current, log);
  const signals = new AcceptSignals(() => controller?.current, log);
  // The server set up on request in the extension's global storage (setup.ts); while it runs,
  // the status bar names its step.
  const managed = new ManagedServer(context, log, (step) => {
    if (step !== undefined) statusBar.setPhase('settingUp', step);
  });
  const server = new ServerController(
    log,
    statusBar,
    ghostText,
    signals,
    () => vscode.commands.executeCommand(CommandIds.switchModelSize),
    managed,
  );
  controller = server;

  context.subscriptions.push(
    log,
    statusBar,
    ghostText,
    signals,
    vscode.languages.registerInlineCompletionItemProvider(
      DOCUMENT_SELECTOR,
      new InlineProvider(() => server.current, ghostText, signals, log),
    ),
    vscode.commands.registerCommand(CommandIds.switchModelSize, switchModelSize),
    vscode.commands.registerCommand(CommandIds.toggle, toggle),
    vscode.commands.registerCommand(CommandIds.showStatus, () => showStatus(server, statusBar, log)),
    vscode.commands.registerCommand(CommandIds.restartServer, () => server.restart()),
    vscode.commands.registerCommand(CommandIds.setUpServer, () => server.setUp('again')),
    vscode.commands.registerCommand(CommandIds.dismiss, () => {
      signals.dismissed(); // first: it reads the item before the suggestion is hidden
      return ghostText.dismiss();
    }),
    // VS Code's own word and line accepts, reported to the server (a partial accept runs no command).
    vscode.commands.registerCommand(CommandIds.acceptNextWord, () => signals.acceptNext('word')),
    vscode.commands.registerCommand(CommandIds.acceptNextLine, () => signals.acceptNext('line')),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration(SECTION)) return;
      // The server hears about its own settings through languageclient; only launch settings
      // need a new process.
      if (LAUNCH_SETTING_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        log.info('Server launch settings changed; restarting the server.');
        void server.restart();
      }
      statusBar.render();
    }),
    // The status bar says whether suggestions are on for the focused editor's language.
    vscode.window.onDidChangeActiveTextEditor(() => statusBar.render()),
    // Trusting a workspace makes its virtual environment eligible (serverPath.ts).
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      if (server.current === undefined) void server.restart();
    }),
  );

  // Not awaited: activation should not wait for the server to initialize. An extension updated
  // since it set up its own server installs the wheel it now carries into it first.
  void (server.needsUpgrade() ? server.setUp('upgrade') : server.start());
}

export async function deactivate(): Promise<void> {
  const server = controller;
  controller = undefined;
  await server?.dispose();
}
