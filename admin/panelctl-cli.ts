import { main } from './panelctl';

// Entry point of `panelctl` (bin/panelctl.cjs): the exit status is main's (1 if it never settles).
process.exitCode = 1;
main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`panelctl: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
