/**
 * Calls `onExit` once when the process between this one and npm goes away (`dpctl serve`, `dpctl
 * controller`, `dpctl apply`); the function returned stops watching. npm runs a script, and
 * `npx`/`npm exec` a command, as `sh -c '<command>'` and, on SIGTERM or SIGINT, forwards the signal
 * to that shell only. dash (Debian's and Ubuntu's sh) keeps itself as node's parent and does not
 * pass signals on, so a `kill <npm pid>` (a process manager, an IDE's stop button, a CI step)
 * killed the shell, npm exited, and this process lived on re-parented to init: `dpctl serve`
 * holding the port and the SQLite file, `dpctl controller` still reconciling, `dpctl apply` still
 * applying. (Ctrl-C is not affected: the terminal signals the whole foreground group, node
 * included.) The parent's death is the one notice that reaches us whatever the shell does: stdin
 * is the terminal (it never ends), npm opens no IPC channel and Node has no PR_SET_PDEATHSIG, so
 * the parent pid is polled (process.ppid is a getppid() per read; it changes to init or a
 * subreaper when the parent dies). Only under npm (npm_lifecycle_event: `npm run`, `npm start`,
 * `npx`; yarn and pnpm set it too): a command started with nohup or `&` from a shell that then
 * exits is meant to outlive that shell.
 */
export function watchParent(onExit: () => void): () => void {
  const parent = process.ppid;
  if (!process.env.npm_lifecycle_event || parent <= 1) return () => undefined;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onExit();
  }, 500);
  // The check never keeps the process alive by itself: the listeners do.
  timer.unref();
  return () => clearInterval(timer);
}
