// The status bar item: collects what the server and the client report and renders it with
// status.ts. Clicking it runs "ghostfim: Show status".

import * as vscode from 'vscode';
import { enabledFor } from './client';
import type { CompletionStats, ServerStatus } from './protocol';
import { AUTO_MODEL_SIZE, SECTION } from './settings';
import {
  type ClientPhase,
  LatencyWindow,
  type ProgressInfo,
  type StatusBarInput,
  type StatusSeverity,
  statusBarView,
} from './status';

const BACKGROUND: Record<StatusSeverity, vscode.ThemeColor | undefined> = {
  normal: undefined,
  warning: new vscode.ThemeColor('statusBarItem.warningBackground'),
  error: new vscode.ThemeColor('statusBarItem.errorBackground'),
};

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  readonly latency = new LatencyWindow();
  private phase: ClientPhase = 'starting';
  private problem: string | undefined;
  private server: ServerStatus | undefined;
  /** Work-done progress in flight, by token; the newest one is shown. */
  private readonly progress = new Map<string | number, ProgressInfo>();

  constructor(showStatusCommand: string) {
    this.item = vscode.window.createStatusBarItem('ghostfim.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'ghostfim';
    this.item.command = showStatusCommand;
    this.render();
    this.item.show();
  }

  get serverStatus(): ServerStatus | undefined {
    return this.server;
  }

  setPhase(phase: ClientPhase, problem?: string): void {
    this.phase = phase;
    this.problem = problem;
    if (phase !== 'running') {
      // Whatever the old process said no longer holds.
      this.server = undefined;
      this.progress.clear();
    }
    this.render();
  }

  setServerStatus(status: ServerStatus): void {
    this.server = status;
    this.render();
  }

  setProgress(token: string | number, info: ProgressInfo | undefined): void {
    if (info === undefined) {
      this.progress.delete(token);
    } else {
      // Reports carry only what changed: keep the title from `begin`.
      this.progress.set(token, { ...this.progress.get(token), ...info });
    }
    this.render();
  }

  addStats(stats: CompletionStats): void {
    this.latency.add(stats);
    this.render();
  }

  /**
   * Re-reads the settings that change the text: model size, and enable as it applies to the
   * focused editor's language (it can be off globally and on for Python, or the reverse).
   */
  render(): void {
    const config = vscode.workspace.getConfiguration(SECTION);
    const document = vscode.window.activeTextEditor?.document;
    const progress = [...this.progress.values()].pop();
    const input: StatusBarInput = {
      enabled: enabledFor(document),
      phase: this.phase,
      server: this.server,
      progress,
      configuredSize: config.get<string>('model.size', AUTO_MODEL_SIZE),
      lastTtftMs: this.latency.lastTtftMs(),
      p95TtftMs: this.latency.ttftP95Ms(),
      problem: this.problem,
    };
    const view = statusBarView(input);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor = BACKGROUND[view.severity];
  }

  dispose(): void {
    this.item.dispose();
  }
}
