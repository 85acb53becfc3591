import fs from 'node:fs';
import path from 'node:path';

// Where a benchmark run is recorded: bench/history/<date>-<topic>.md (one file per topic and day,
// runs appended), or BENCH_RESULTS_FILE for trial runs. bench/results.md keeps the current figures
// by hand, from these files.

export function historyFile(topic: string): string {
  if (process.env.BENCH_RESULTS_FILE) return path.resolve(process.env.BENCH_RESULTS_FILE);
  return path.join(__dirname, 'history', `${new Date().toISOString().slice(0, 10)}-${topic}.md`);
}

/** Appends one run's section to its history file (with a title when the file is new); returns the file. */
export function recordRun(topic: string, text: string): string {
  const file = historyFile(topic);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const title = fs.existsSync(file) ? '' : `# ${topic} — runs of ${path.basename(file).slice(0, 10)}\n`;
  fs.appendFileSync(file, `${title}\n${text.trimEnd()}\n`);
  return file;
}
