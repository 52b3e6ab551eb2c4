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

// A form with data-submit-once is sent once: a second click (or Enter) while the page is
// leaving does nothing. Its buttons are disabled after the event, so that the one clicked
// still sends its name and value.
document.addEventListener("submit", function (event) {
  const form = event.target;
  if (!form.hasAttribute("data-submit-once")) {
    return;
  }
  if (form.dataset.sent === "1") {
    event.preventDefault();
    return;
  }
  form.dataset.sent = "1";
  setTimeout(function () {
    form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (button) {
      if (!button.disabled) {
        button.disabled = true;
        button.dataset.sentDisabled = "1";
      }
    });
  }, 0);
});

// A page shown again from the browser's history (Back) may keep a sent form's state: allow it
// to be sent again.
window.addEventListener("pageshow", function () {
  document.querySelectorAll("form[data-sent]").forEach(function (form) {
    delete form.dataset.sent;
    form.querySelectorAll("button[data-sent-disabled]").forEach(function (button) {
      button.disabled = false;
      delete button.dataset.sentDisabled;
    });
  });
});

// A button with data-confirm="question" asks it first; Cancel sends nothing.
document.addEventListener(
  "click",
  function (event) {
    const button = event.target.closest("[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  },
  true,
);
