// Server-rendered HTML for the dashboard: a tagged template that escapes every interpolated
// value unless it is already Html, so a label or a model id can never inject markup.

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escape = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

type Value = Html | string | number | boolean | null | undefined | Value[];

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (Array.isArray(v)) return v.map(render).join('');
  if (v instanceof Html) return v.text;
  return escape(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

export interface PageChrome {
  title: string;
  /** the signed-in user; absent on the sign-in page */
  user?: { email: string; role: string; csrfToken: string };
  /** the nav entry to mark */
  current?: 'keys' | 'requests' | 'usage' | 'team' | 'account';
}

const NAV: [PageChrome['current'], string, string][] = [
  ['keys', '/dashboard/keys', 'API keys'],
  ['requests', '/dashboard/requests', 'Requests'],
  ['usage', '/dashboard/usage', 'Usage & balance'],
  ['team', '/dashboard/team', 'Team'],
];

/** A whole page: the nav (when signed in), the content, the one stylesheet and script. */
export function page(c: PageChrome, content: Html): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${c.title} · Gateway dashboard</title>
<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
<script src="/dashboard/assets/dashboard.js" defer></script>
</head>
<body>
<header class="top">
  <a class="brand" href="/dashboard">Gateway dashboard</a>
  ${c.user
    ? html`<nav>${NAV.map(([id, href, label]) => html`<a href="${href}"${c.current === id ? html` aria-current="page"` : ''}>${label}</a>`)}</nav>
  <form class="signout" method="post" action="/dashboard/sign-out">${csrfField(c.user.csrfToken)}<a href="/dashboard/account"${c.current === 'account' ? html` aria-current="page"` : ''}>${c.user.email}</a> <button type="submit">Sign out</button></form>`
    : ''}
</header>
<main>
<h1>${c.title}</h1>
${content}
</main>
</body>
</html>`.text;
}

export const csrfField = (token: string) => html`<input type="hidden" name="_csrf" value="${token}">`;

/** A time as UTC, to the second; a dash for none. */
export const when = (iso: string | null | undefined) => (iso ? `${iso.slice(0, 19).replace('T', ' ')} UTC` : '—');
