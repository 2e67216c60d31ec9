// The language client for `ghostfim serve`: how it is launched, which settings it is sent, and
// what happens when the process dies. Starting and stopping it is serverController.ts's job.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as vscode from 'vscode';
import {
  type ClientCapabilities,
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  type FeatureState,
  LanguageClient,
  type LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  type ServerCapabilities,
  type ServerOptions,
  type StaticFeature,
  type WorkDoneProgressBegin,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
} from 'vscode-languageclient/node';
import { ACCEPTED_COMMAND } from './acceptance';
import { type LaunchResolution, resolveServerLaunch } from './launch';
import { RestartBudget } from './restartPolicy';
import type { ExecutableSearch } from './serverPath';
import { languageEnabled, SECTION, type ServerSettings, serverEnable, toServerSettings } from './settings';

export const CLIENT_ID = 'ghostfim';
const CLIENT_NAME = 'ghostfim';

/** Only real files and unsaved buffers: other schemes have no text worth completing here. */
export const DOCUMENT_SELECTOR = [{ scheme: 'file' }, { scheme: 'untitled' }];

/** Whether suggestions are on for this document (its language's value; prose is off by default). */
export function enabledFor(document: vscode.TextDocument | undefined): boolean {
  const config = vscode.workspace.getConfiguration(SECTION, document);
  // No text editor (the Settings editor, say): on if any language is on.
  if (document === undefined) return currentServerSettings().enable !== false;
  return languageEnabled(document.languageId, config.get('enable'), config.inspect('enable'));
}

/** The settings object the server reads, from the current `ghostfim` section. */
export function currentServerSettings(): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION);
  // Languages with a value of their own.
  const languages = config.inspect('enable')?.languageIds ?? [];
  const enable = serverEnable(
    config.get('enable'),
    languages.map((languageId) => vscode.workspace.getConfiguration(SECTION, { languageId }).get('enable')),
  );
  return toServerSettings((key) => (key === 'enable' ? enable : config.get(key)));
}

function isExecutableFile(candidate: string): boolean {
  try {
    if (!fs.statSync(candidate).isFile()) return false;
    // Windows has no execute bit; PATHEXT already limited the candidates there.
    if (process.platform !== 'win32') fs.accessSync(candidate, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function hostSearch(managed: string | undefined): ExecutableSearch {
  return {
    ...(managed !== undefined ? { managed } : {}),
    platform: process.platform,
    pathEnv: process.env.PATH,
    pathExtEnv: process.env.PATHEXT,
    homeDir: os.homedir(),
    workspaceFolders: (vscode.workspace.workspaceFolders ?? [])
      .filter((folder) => folder.uri.scheme === 'file')
      .map((folder) => folder.uri.fsPath),
    workspaceTrusted: vscode.workspace.isTrusted,
    isFile: isExecutableFile,
  };
}

/**
 * Resolves how to start the server on this machine from the current settings; `managed` is the
 * server the extension set up itself, if one is ready.
 */
export function resolveLaunchHere(managed?: string): LaunchResolution {
  const config = vscode.workspace.getConfiguration(SECTION);
  return resolveServerLaunch(
    { serverPath: config.get('serverPath'), serverArgs: config.get('serverArgs') },
    hostSearch(managed),
    process.env,
  );
}

export type WorkDoneProgressValue = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

export interface ClientHooks {
  log: vscode.LogOutputChannel;
  /** Every `$/progress` value the server reports (model download and load). */
  onWorkDoneProgress(token: string | number, value: WorkDoneProgressValue): void;
  /** The server died more often than the restart budget allows and stays down. */
  onGaveUp(message: string): void;
  /** VS Code ran an item's accept command (a full accept); languageclient sends it on. */
  onAcceptCommand(args: unknown[]): void;
}

/**
 * languageclient 9 only registers its inline completion support among the "proposed" features,
 * which this extension does not load (it registers its own provider). This declares the
 * capability so the server knows the client asks for inline completions.
 */
class InlineCompletionCapability implements StaticFeature {
  constructor(private readonly log: vscode.LogOutputChannel) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const textDocument = (capabilities.textDocument ??= {});
    (textDocument as Record<string, unknown>).inlineCompletion = { dynamicRegistration: false };
  }

  initialize(capabilities: ServerCapabilities): void {
    if ((capabilities as Record<string, unknown>).inlineCompletionProvider === undefined) {
      this.log.warn('The server does not announce inlineCompletionProvider; requests may fail.');
    }
  }

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {
    // Nothing registered, nothing to undo.
  }
}

export function createLanguageClient(launch: Extract<LaunchResolution, { ok: true }>['launch'], hooks: ClientHooks): LanguageClient {
  const cwd = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file')?.uri.fsPath;
  const serverOptions: ServerOptions = {
    command: launch.command,
    args: launch.args,
    // No `transport`: languageclient would append `--stdio`, which `ghostfim serve` does not take
    // (stdio is its default).
    options: { env: launch.env, cwd },
  };
  const budget = new RestartBudget();

  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: hooks.log,
    // The server's stderr is a log, not a reason to pop the panel open.
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // Evaluated at every (re)start, so a restarted server gets the settings of that moment.
    initializationOptions: () => currentServerSettings(),
    // Makes languageclient listen for `ghostfim.*` changes; the middleware below shapes what is sent.
    synchronize: { configurationSection: SECTION },
    initializationFailedHandler: (error) => {
      hooks.log.error(`Initializing the server failed: ${String(error)}`);
      return false;
    },
    errorHandler: {
      error: (_error, _message, count) =>
        // A few garbled messages are survivable; a stream of them means the pipe is broken.
        count !== undefined && count <= 3 ? { action: ErrorAction.Continue } : { action: ErrorAction.Shutdown },
      closed: () => {
        if (budget.tryRestart(Date.now())) {
          hooks.log.warn('The server exited unexpectedly; restarting it.');
          return { action: CloseAction.Restart, handled: true };
        }
        const message =
          `The ghostfim server stopped ${budget.maxRestarts + 1} times within ` +
          `${budget.windowMs / 60_000} minutes and will not be restarted automatically.`;
        hooks.log.error(message);
        hooks.onGaveUp(message);
        return { action: CloseAction.DoNotRestart, handled: true };
      },
    },
    middleware: {
      handleWorkDoneProgress: (token, params, next) => {
        hooks.onWorkDoneProgress(token, params);
        next(token, params);
      },
      // languageclient registers the server's executeCommandProvider commands (ghostfim.accepted)
      // as VS Code commands and sends them as workspace/executeCommand; this only watches.
      executeCommand: (command, args: unknown[], next): unknown => {
        if (command === ACCEPTED_COMMAND) hooks.onAcceptCommand(args);
        return next(command, args) as unknown;
      },
      workspace: {
        // languageclient would send `{ghostfim: <whole section>}`, client-only keys included and
        // `model.size: "auto"` verbatim; the server gets exactly its settings table instead.
        didChangeConfiguration: async () => {
          await client.sendNotification(DidChangeConfigurationNotification.type, {
            settings: { [SECTION]: currentServerSettings() },
          });
        },
        // Same shape if the server pulls settings with workspace/configuration.
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (result instanceof ResponseError || !Array.isArray(result)) return result;
          return result.map((value: unknown, index) =>
            params.items[index]?.section === SECTION ? currentServerSettings() : value,
          );
        },
      },
    },
  };

  // The middleware above refers to `client`; it only runs once the client exists.
  const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client.registerFeature(new InlineCompletionCapability(hooks.log));
  return client;
}

