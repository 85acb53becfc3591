// Branding (spec 2 section 2.7) applied to the document: the display name as the title, the accent colour (#rrggbb, checked by the API).
export function applyBranding(b) {
  document.title = b && b.display_name ? b.display_name : 'Hosting panel';
  if (b && b.accent_color) document.documentElement.style.setProperty('--accent', b.accent_color);
  else document.documentElement.style.removeProperty('--accent');
}
