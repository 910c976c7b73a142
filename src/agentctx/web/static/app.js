// agentctx dashboard: the writes (forms marked data-api) and auto-submitting filters.
// Hand-written, no dependencies. Every write carries the per-start token from the page's
// <meta name="agentctx-token"> (only an authenticated page has it) and the session cookie;
// the server refuses a write without them.
"use strict";

(function () {
  const meta = document.querySelector('meta[name="agentctx-token"]');
  const token = meta ? meta.getAttribute("content") : "";

  function formData(form) {
    const data = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      if (el.type === "checkbox") data[el.name] = el.checked;
      else data[el.name] = el.value;
    }
    return data;
  }

  async function send(form) {
    const error = form.querySelector(".error");
    const buttons = form.querySelectorAll("button");
    if (error) error.textContent = "";
    buttons.forEach((b) => (b.disabled = true));
    try {
      const response = await fetch(form.dataset.api, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Agentctx-Token": token },
        body: JSON.stringify(formData(form)),
        credentials: "same-origin", // the session cookie (HttpOnly, SameSite=Strict)
      });
      let reply = {};
      try {
        reply = await response.json();
      } catch (e) {
        reply = { error: (await response.text()) || response.statusText };
      }
      if (!response.ok) throw new Error(reply.error || response.statusText);
      window.location.assign(reply.url || window.location.href);
    } catch (e) {
      if (error) error.textContent = e.message;
      buttons.forEach((b) => (b.disabled = false));
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.api) {
      event.preventDefault();
      send(form);
    }
  });

  document.addEventListener("change", (event) => {
    const el = event.target;
    if (el instanceof HTMLSelectElement && el.dataset.autosubmit && el.form) {
      el.form.requestSubmit();
    }
  });
})();
