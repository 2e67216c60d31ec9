// The commands in the palette: switch model size, toggle, show status, restart server (and the
// ids of the key-bound ones extension.ts registers: dismiss, accept next word and line).

import * as vscode from 'vscode';
import { enabledFor } from './client';
import { acceptanceOf, budgetsOf, type CompletionStats } from './protocol';
import type { ServerController } from './serverController';
import {
  AUTO_MODEL_SIZE,
  MODEL_SIZE_DESCRIPTIONS,
  MODEL_SIZES,
  SECTION,
  toggleWriteFor,
  type WriteTarget,
  writeTargetFor,
} from './settings';
import { formatAcceptance, formatBudgets, formatLatencySummary, formatModel, formatStatsRow } from './status';
import type { StatusBar } from './statusBar';

export const CommandIds = {
  switchModelSize: 'ghostfim.switchModelSize',
  toggle: 'ghostfim.toggle',
  showStatus: 'ghostfim.showStatus',
  restartServer: 'ghostfim.restartServer',
  setUpServer: 'ghostfim.setUpServer',
  dismiss: 'ghostfim.dismiss',
  acceptNextWord: 'ghostfim.acceptNextWord',
  acceptNextLine: 'ghostfim.acceptNextLine',
} as const;

const TARGETS: Record<WriteTarget, vscode.ConfigurationTarget> = {
  global: vscode.ConfigurationTarget.Global,
  workspace: vscode.ConfigurationTarget.Workspace,
  workspaceFolder: vscode.ConfigurationTarget.WorkspaceFolder,
};

/** Writes a `ghostfim.*` setting where it takes effect (see writeTargetFor). */
async function writeSetting(key: string, value: unknown): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  await config.update(key, value, TARGETS[writeTargetFor(config.inspect(key))]);
}

interface SizeItem extends vscode.QuickPickItem {
  size: string;
}

/** Quick pick of the presets. The server loads the new one in the background, no restart. */
export async function switchModelSize(): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const current = config.get<string>('model.size', AUTO_MODEL_SIZE);
  const items: SizeItem[] = [
    ...MODEL_SIZES.map((size) => ({ size, label: size, description: MODEL_SIZE_DESCRIPTIONS[size] })),
    { size: AUTO_MODEL_SIZE, label: AUTO_MODEL_SIZE, description: 'let the server choose: small on CPU, medium on a CUDA GPU' },
  ].map((item) => (item.size === current ? { ...item, label: `$(check) ${item.label}` } : item));
  const picked = await vscode.window.showQuickPick(items, {
    title: 'ghostfim: model size',
    placeHolder: `Current: ${current}`,
  });
  if (picked === undefined || picked.size === current) return;
  await writeSetting('model.size', picked.size);

  // A model file overrides the preset; say so rather than leave the user wondering.
  const modelPath = config.get<string | null>('model.path', null);
  if (typeof modelPath === 'string' && modelPath !== '') {
    const choice = await vscode.window.showWarningMessage(
      `ghostfim.model.path (${modelPath}) overrides the model size. Clear it to use "${picked.size}"?`,
      'Clear model.path',
    );
    if (choice === 'Clear model.path') await writeSetting('model.path', null);
  }
}

/**
 * Turns inline suggestions on or off for what the focused editor shows: its language's own value
 * when it has one, else the plain setting (toggleWriteFor). The server is told through the settings.
 */
export async function toggle(): Promise<void> {
  const document = vscode.window.activeTextEditor?.document;
  const config = vscode.workspace.getConfiguration(SECTION, document);
  const enabled = enabledFor(document);
  const write = toggleWriteFor(config.inspect('enable'), document?.languageId);
  await config.update('enable', !enabled, TARGETS[write.target], write.inLanguage);
  if (enabled) await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
  const where = write.inLanguage && document !== undefined ? ` for ${document.languageId}` : '';
  vscode.window.setStatusBarMessage(`ghostfim ${enabled ? 'disabled' : 'enabled'}${where}`, 2000);
}

type StatusAction = 'switch' | 'toggle' | 'restart' | 'setup' | 'log';

interface StatusItem extends vscode.QuickPickItem {
  action?: StatusAction;
}

const RECENT_SHOWN = 10;

/** State, model, latency percentiles and the last completions stage by stage, plus actions. */
export async function showStatus(
  server: ServerController,
  statusBar: StatusBar,
  log: vscode.LogOutputChannel,
): Promise<void> {
  const status = (await server.refreshStatus()) ?? statusBar.serverStatus;
  const enabled = enabledFor(vscode.window.activeTextEditor?.document);
  const separator = (label: string): StatusItem => ({ label, kind: vscode.QuickPickItemKind.Separator });

  const items: StatusItem[] = [separator('Server')];
  if (status === undefined) {
    items.push({ label: '$(debug-disconnect) Not running', description: 'see the log for why' });
  } else {
    const stateIcon = status.state === 'ready' ? '$(pass)' : status.state === 'loading' ? '$(loading~spin)' : '$(error)';
    items.push({
      label: `${stateIcon} ${status.state}`,
      description: formatModel(status.model),
      detail: status.error ?? undefined,
    });
    items.push({ label: '$(dashboard) Latency', description: formatLatencySummary(status.latency) });
    const acceptance = acceptanceOf(status);
    const accepted = formatAcceptance(acceptance);
    if (accepted !== undefined) {
      const shown = acceptance?.shown !== undefined ? ` of ${acceptance.shown} shown` : '';
      const chars = acceptance?.acceptedChars !== undefined ? `, ${acceptance.acceptedChars} characters taken` : '';
      items.push({ label: '$(check) Suggestions this session', description: `${accepted}${shown}${chars}` });
    }
    const budgets = formatBudgets(budgetsOf(status));
    if (budgets !== undefined) items.push({ label: '$(settings) Prompt budget', description: budgets });
  }

  // The server's history when it answered, else what this window collected.
  const recent: CompletionStats[] =
    status?.recent !== undefined && status.recent.length > 0 ? status.recent : statusBar.latency.recent(RECENT_SHOWN);
  if (recent.length > 0) {
    items.push(separator('Last completions, newest first'));
    for (const stats of recent.slice(-RECENT_SHOWN).reverse()) items.push(formatStatsRow(stats));
  }

  items.push(
    separator('Actions'),
    { label: '$(arrow-swap) Switch model size…', action: 'switch' },
    { label: enabled ? '$(circle-slash) Disable ghostfim' : '$(sparkle) Enable ghostfim', action: 'toggle' },
    { label: '$(debug-restart) Restart server', action: 'restart' },
    ...(status === undefined
      ? [{ label: '$(tools) Set up the server…', description: "in the extension's own storage", action: 'setup' as const }]
      : []),
    { label: '$(output) Show log', action: 'log' },
  );

  const picked = await vscode.window.showQuickPick(items, {
    title: 'ghostfim status',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  switch (picked?.action) {
    case 'switch':
      return switchModelSize();
    case 'toggle':
      return toggle();
    case 'restart':
      return server.restart();
    case 'setup':
      return server.setUp('again');
    case 'log':
      log.show(true);
      return;
    case undefined:
      return;
  }
}
