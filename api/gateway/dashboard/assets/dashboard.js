/* global document, navigator, window */
// The dashboard's only script: copy buttons and confirmations. Every page works without it.
document.addEventListener('click', (e) => {
  const button = e.target.closest('[data-copy]');
  if (!button) return;
  const text = document.getElementById(button.dataset.copy).textContent.trim();
  navigator.clipboard.writeText(text).then(
    () => (button.textContent = 'Copied'),
    () => (button.textContent = 'Select and copy by hand'),
  );
});
document.addEventListener('submit', (e) => {
  const message = e.target.dataset.confirm;
  if (message && !window.confirm(message)) e.preventDefault();
});
