// Small building blocks every page uses: html (htm bound to preact), navigation, loading data,
// forms with labelled fields and the API's error shown as it is.
import { h } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

// ---- navigation (history API; every console address is served the same page) ----
const routeListeners = new Set();
export function navigate(to, replace = false) {
  if (to === location.pathname + location.search) return;
  history[replace ? 'replaceState' : 'pushState'](null, '', to);
  for (const fn of routeListeners) fn();
}
window.addEventListener('popstate', () => routeListeners.forEach((fn) => fn()));

/** The current address; re-renders on navigation. */
export function useLocation() {
  const [, force] = useState(0);
  useEffect(() => {
    const fn = () => force((n) => n + 1);
    routeListeners.add(fn);
    return () => routeListeners.delete(fn);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

export function Link({ href, children, ...rest }) {
  const click = (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
    e.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${click} ...${rest}>${children}</a>`;
}

// ---- data ----
/** Loads `load()` when `deps` change; `reload()` loads again. */
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const run = useCallback(() => {
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => setState({ data, error: null, loading: false }),
      (error) => setState({ data: null, error, loading: false }),
    );
  }, deps);
  useEffect(run, [run]);
  return { ...state, reload: run };
}

/** A data block: its error, a loading line, or its content. */
export function Loaded({ state, children }) {
  if (state.error) return html`<${ErrorBox} error=${state.error} />`;
  if (state.loading && !state.data) return html`<p class="muted" aria-busy="true">Loading…</p>`;
  return children(state.data);
}

// ---- forms ----
let ids = 0;
const nextId = () => `f${++ids}`;

/** The API's message as it is, in an alert region screen readers announce. */
export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert"><strong>${error.message}</strong>${error.code ? html` <code class="muted">${error.code}</code>` : null}</div>`;
}

export function Notice({ children, kind = 'ok' }) {
  return html`<div class=${'notice ' + kind} role="status">${children}</div>`;
}

/** A labelled input; `hint` is tied to it with aria-describedby. */
export function Field({ label, hint, type = 'text', value, onInput, required, ...rest }) {
  const [id] = useState(nextId);
  const input =
    type === 'checkbox'
      ? html`<input id=${id} type="checkbox" checked=${value} onChange=${(e) => onInput(e.target.checked)} aria-describedby=${hint ? id + 'h' : undefined} ...${rest} />`
      : html`<input id=${id} type=${type} value=${value ?? ''} onInput=${(e) => onInput(e.target.value)} required=${required} aria-describedby=${hint ? id + 'h' : undefined} ...${rest} />`;
  return html`<div class=${'field ' + (type === 'checkbox' ? 'check' : '')}>
    <label for=${id}>${label}</label>
    ${input}
    ${hint ? html`<small id=${id + 'h'} class="muted">${hint}</small>` : null}
  </div>`;
}

export function Select({ label, value, onInput, options, hint, ...rest }) {
  const [id] = useState(nextId);
  return html`<div class="field">
    <label for=${id}>${label}</label>
    <select id=${id} value=${value} onChange=${(e) => onInput(e.target.value)} aria-describedby=${hint ? id + 'h' : undefined} ...${rest}>
      ${options.map((o) => html`<option value=${o.value} disabled=${o.disabled}>${o.label}</option>`)}
    </select>
    ${hint ? html`<small id=${id + 'h'} class="muted">${hint}</small>` : null}
  </div>`;
}

/** Runs `action()` once at a time: busy while it runs, its refusal kept as `error`, `done(result)` after success. */
function useRun(action, done) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      const out = await action();
      setBusy(false);
      if (done) done(out);
    } catch (err) {
      setBusy(false);
      setError(err);
    }
  };
  return { busy, error, run };
}

/** A form whose submit runs `action()`; a refusal shows the API's message above the button. */
export function Form({ action, done, submit, children, label, danger }) {
  const { busy, error, run } = useRun(action, done);
  const onSubmit = (e) => {
    e.preventDefault();
    void run();
  };
  return html`<form onSubmit=${onSubmit} aria-label=${label}>
    ${children}
    <${ErrorBox} error=${error} />
    <button type="submit" class=${danger ? 'danger' : ''} disabled=${busy} aria-busy=${busy}>${busy ? 'Working…' : submit}</button>
  </form>`;
}

/** A button that runs an action (after `confirm`, if given) and shows its refusal next to it. */
export function ActionButton({ action, done, children, danger, confirm }) {
  const { busy, error, run } = useRun(action, done);
  const click = () => {
    if (confirm && !window.confirm(confirm)) return;
    void run();
  };
  return html`<span class="action"><button type="button" class=${danger ? 'danger' : 'secondary'} onClick=${click} disabled=${busy}>${children}</button><${ErrorBox} error=${error} /></span>`;
}

/** A table with a caption; `cols` are [header, cell(row)] pairs. */
export function Table({ caption, rows, cols, empty = 'Nothing here yet.', rowClass }) {
  if (!rows.length) return html`<p class="muted">${empty}</p>`;
  return html`<table>
    ${caption ? html`<caption>${caption}</caption>` : null}
    <thead><tr>${cols.map(([hd]) => html`<th scope="col">${hd}</th>`)}</tr></thead>
    <tbody>${rows.map((r) => html`<tr class=${rowClass ? rowClass(r) : ''}>${cols.map(([, cell]) => html`<td>${cell(r)}</td>`)}</tr>`)}</tbody>
  </table>`;
}

// ---- formatting ----
export const ago = (t) => {
  if (!t) return 'never';
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
};
export const when = (t) => (t ? new Date(t).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : '—');
export const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
