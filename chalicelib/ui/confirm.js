// The one confirmation every action that cannot be undone goes through: a modal dialog
// (index.html's #confirm) saying what will happen; only its confirm button goes ahead.
// Escape, the keep button and closing the dialog any other way change nothing.

const dialog = document.getElementById('confirm');
const title = document.getElementById('confirm-title');
const text = document.getElementById('confirm-text');
const yes = document.getElementById('confirm-yes');
const keep = document.getElementById('confirm-keep');

yes.addEventListener('click', () => dialog.close('confirm'));
keep.addEventListener('click', () => dialog.close('keep'));

/** Close an open question, unconfirmed: the view it was asked in is gone. */
export function dismissConfirmation() {
  if (dialog.open) dialog.close('keep');
}

/** Ask before `label` (the confirm button's text) does what `message` says: resolves to
 * true only when the user confirms. */
export function confirmAction(label, message) {
  if (dialog.open) dialog.close('keep');
  title.textContent = `${label}?`;
  text.textContent = message;
  yes.textContent = label;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true });
    dialog.showModal();
    keep.focus(); // the safe choice is the default one
  });
}
