// The job page's log view: any task attempt, any stream, followed live while the task runs.
"use strict";

(function () {
  const MAX_SHOWN_CHARS = 4000000;

  function setUp() {
    const source = document.getElementById("log-source");
    const stream = document.getElementById("log-stream");
    const followBox = document.getElementById("log-follow");
    const view = document.getElementById("log-view");
    const status = document.getElementById("log-status");
    const raw = document.getElementById("log-raw");
    if (!source || !view) return;
    const controls = source.closest(".log-controls");
    const tail = Number(status.dataset.tail);
    let reading = null;

    function atBottom() {
      return view.scrollHeight - view.scrollTop - view.clientHeight < 40;
    }

    function append(text) {
      const stick = atBottom();
      view.append(text);
      if (view.textContent.length > MAX_SHOWN_CHARS) {
        view.textContent = view.textContent.slice(-MAX_SHOWN_CHARS / 2);
      }
      if (stick) view.scrollTop = view.scrollHeight;
    }

    function end(text) {
      const marker = document.createElement("span");
      marker.className = "log-end";
      marker.textContent = `\n— ${text} —\n`;
      const stick = atBottom();
      view.append(marker);
      if (stick) view.scrollTop = view.scrollHeight;
    }

    async function load() {
      if (reading) reading.abort();
      view.replaceChildren();
      controls.hidden = view.hidden = !source.value;
      if (!source.value) return;
      const url = `${source.value}/${stream.value}`;
      raw.href = url;
      const follow = followBox.checked;
      reading = new AbortController();
      const signal = reading.signal;
      status.textContent = follow ? "Following the log…" : "Loading the log…";
      try {
        const response = await fetch(`${url}?tail=${tail}${follow ? "&follow=true" : ""}`, {
          headers: window.pai.SCRIPT_HEADERS,
          signal,
        });
        if (!response.ok) {
          const answer = await response.json().catch(() => ({ message: `HTTP ${response.status}` }));
          status.textContent = answer.message;
          return;
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let received = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          received += value.length;
          append(decoder.decode(value, { stream: true }));
        }
        append(decoder.decode());
        const cut = received >= tail ? ` (the last ${Math.round(tail / 1024)} KiB; the raw log has all of it)` : "";
        if (follow) {
          end("the task attempt has ended");
          status.textContent = `The whole log${cut}.`;
        } else {
          status.textContent = `The log as it is now${cut}.`;
        }
      } catch (error) {
        if (error.name !== "AbortError") status.textContent = `The log could not be read (${error.message}).`;
      }
    }

    // New task attempts appear while the job runs: keep the list current, and the choice.
    function updateSources() {
      const holder = document.querySelector("[data-log-sources]");
      if (!holder) return;
      const sources = JSON.parse(holder.dataset.logSources);
      const chosen = source.value;
      const known = Array.from(source.options, (option) => option.value);
      if (known.join("\n") === sources.map((item) => item.url).join("\n")) return;
      source.replaceChildren(...sources.map((item) => new Option(item.label, item.url)));
      if (sources.some((item) => item.url === chosen)) {
        source.value = chosen;
      } else if (sources.length) {
        load();
      }
    }

    source.addEventListener("change", load);
    stream.addEventListener("change", load);
    followBox.addEventListener("change", load);
    document.addEventListener("pai:refreshed", updateSources);
    document.addEventListener("click", (event) => {
      const link = event.target.closest("[data-log-source]");
      if (!link) return;
      event.preventDefault();
      source.value = link.dataset.logSource;
      load();
      document.getElementById("logs").scrollIntoView({ behavior: "smooth", block: "start" });
    });
    window.addEventListener("pagehide", () => reading && reading.abort());
    load();
  }

  document.addEventListener("DOMContentLoaded", setUp);
})();
