// The dashboard's few behaviours that htmx attributes cannot say without evaluated code (htmx
// runs with allowEval off, and a Content Security Policy without unsafe-eval is planned).
"use strict";

document.addEventListener("htmx:beforeRequest", function (event) {
  const elt = event.detail.elt;

  // A region that refreshes itself (data-keep-focus) skips a refresh while the keyboard focus
  // is inside it: the swap would drop the focus. The next tick asks again.
  if (elt.hasAttribute("data-keep-focus") && elt.contains(document.activeElement)) {
    event.preventDefault();
    return;
  }

  // A button that shows something in the slot it controls hides it again on the next click.
  if (elt.getAttribute("aria-expanded") === "true") {
    event.preventDefault();
    const slot = document.getElementById(elt.getAttribute("aria-controls"));
    if (slot) {
      slot.replaceChildren();
    }
    elt.setAttribute("aria-expanded", "false");
  }
});

document.addEventListener("htmx:afterSwap", function (event) {
  const slot = event.target;
  if (!slot.id) {
    return;
  }
  const selector = '[aria-expanded][aria-controls="' + CSS.escape(slot.id) + '"]';
  document.querySelectorAll(selector).forEach(function (button) {
    button.setAttribute("aria-expanded", "true");
  });
});

// A button with data-dismiss="selector" removes its closest ancestor matching the selector
// (a preview's Cancel).
document.addEventListener("click", function (event) {
  const button = event.target.closest("[data-dismiss]");
  const dismissed = button && button.closest(button.dataset.dismiss);
  if (dismissed) {
    dismissed.remove();
  }
});
