// The portal's common behaviour, on every page. Pages work without it; it adds local times,
// parts of pages that refresh themselves, confirmations before destructive forms, and copying.
"use strict";

(function () {
  const SCRIPT_HEADERS = { "X-Requested-With": "pai-portal" };
  const thisYear = new Intl.DateTimeFormat(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const otherYear = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });

  // Times are written in UTC by the server; show them in the visitor's time zone.
  function localizeTimes(root) {
    root.querySelectorAll("time[datetime]").forEach((element) => {
      const at = new Date(element.getAttribute("datetime"));
      if (Number.isNaN(at.getTime()) || element.dataset.localized) return;
      element.title = element.textContent;
      const format = at.getFullYear() === new Date().getFullYear() ? thisYear : otherYear;
      element.textContent = format.format(at);
      element.dataset.localized = "true";
    });
  }

  // An element with data-refresh-url replaces its content with that URL's every
  // data-refresh-seconds, until paused, or until the content says data-refresh-final="true".
  function autoRefresh(element) {
    const seconds = Number(element.dataset.refreshSeconds || "5");
    const toggle = document.querySelector(`[data-refresh-toggle="${element.id}"]`);
    const status = document.querySelector(`[data-refresh-status="${element.id}"]`);
    let paused = false;
    let timer = null;

    function finished() {
      return element.querySelector('[data-refresh-final="true"]') !== null;
    }
    function say(text) {
      if (status) status.textContent = text;
    }
    function schedule() {
      clearTimeout(timer);
      if (!paused && !finished()) timer = setTimeout(refresh, seconds * 1000);
    }
    async function refresh() {
      if (document.hidden) { schedule(); return; }
      try {
        const response = await fetch(element.dataset.refreshUrl, { headers: SCRIPT_HEADERS });
        if (response.status === 401) {
          say("Your session has ended: reload the page to log in again.");
          paused = true;
          return;
        }
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        element.innerHTML = await response.text();
        localizeTimes(element);
        element.dispatchEvent(new CustomEvent("pai:refreshed", { bubbles: true }));
        say(`Updated at ${new Date().toLocaleTimeString()}`);
      } catch (error) {
        say(`Could not update (${error.message}); trying again.`);
      }
      schedule();
    }
    if (toggle) {
      toggle.addEventListener("click", () => {
        paused = !paused;
        toggle.setAttribute("aria-pressed", String(paused));
        toggle.textContent = paused ? "Resume updates" : "Pause updates";
        say(paused ? "Updates paused" : `Updates every ${seconds} s`);
        if (!paused) refresh(); else clearTimeout(timer);
      });
    }
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && !paused && !finished()) refresh();
    });
    schedule();
  }

  // Forms with data-confirm ask first (the question says what will happen).
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  // Buttons with data-copy copy the value of the element with that id.
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-copy]");
    if (!button) return;
    const field = document.getElementById(button.dataset.copy);
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
    } catch (error) {
      document.execCommand("copy");
    }
    button.textContent = "Copied";
  });

  document.addEventListener("DOMContentLoaded", () => {
    localizeTimes(document);
    document.querySelectorAll("[data-refresh-url]").forEach(autoRefresh);
  });

  window.pai = { SCRIPT_HEADERS, localizeTimes };
})();
