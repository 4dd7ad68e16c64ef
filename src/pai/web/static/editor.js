// The job editor: line numbers, and the server's check of the YAML while typing, with each
// problem marked at its line (in the gutter, and as a note after the line's text).
"use strict";

(function () {
  const CHECK_DELAY_MS = 400;

  function setUp(editor) {
    const textarea = editor.querySelector("textarea");
    const gutter = editor.querySelector(".editor-gutter");
    const backdrop = editor.querySelector(".editor-backdrop");
    const form = editor.closest("form");
    const result = document.getElementById("job-check");
    const fieldset = document.getElementById("parameters");
    const csrf = form.querySelector('input[name="csrf_token"]').value;
    let problems = [];
    let timer = null;
    let checking = null;

    function byLine() {
      const lines = new Map();
      for (const problem of problems) {
        if (problem.line == null) continue;
        const message = (problem.path ? `${problem.path}: ` : "") + problem.message;
        lines.set(problem.line, lines.has(problem.line) ? `${lines.get(problem.line)}; ${message}` : message);
      }
      return lines;
    }

    function paint() {
      const lines = textarea.value.split("\n");
      const marked = byLine();
      const numbers = document.createDocumentFragment();
      const shadow = document.createDocumentFragment();
      lines.forEach((text, index) => {
        const number = index + 1;
        const message = marked.get(number);
        const cell = document.createElement("div");
        cell.textContent = String(number);
        const line = document.createElement("span");
        line.className = "line";
        line.textContent = text || " ";
        if (message) {
          cell.className = "error";
          cell.title = message;
          line.classList.add("error");
          const note = document.createElement("span");
          note.className = "line-message";
          note.textContent = message;
          line.append(note);
        }
        numbers.append(cell);
        shadow.append(line);
      });
      gutter.replaceChildren(numbers);
      backdrop.replaceChildren(shadow);
      follow();
    }

    function follow() {
      gutter.scrollTop = textarea.scrollTop;
      backdrop.scrollTop = textarea.scrollTop;
      backdrop.scrollLeft = textarea.scrollLeft;
    }

    function goToLine(number) {
      const lines = textarea.value.split("\n");
      const start = lines.slice(0, number - 1).reduce((sum, line) => sum + line.length + 1, 0);
      textarea.focus();
      textarea.setSelectionRange(start, start + (lines[number - 1] || "").length);
      const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight);
      textarea.scrollTop = Math.max(0, (number - 3) * lineHeight);
      follow();
    }

    function showResult(answer) {
      result.replaceChildren();
      if (!answer.problems.length) {
        const ok = document.createElement("p");
        ok.className = "check-ok";
        ok.textContent = `✓ ${answer.summary}`;
        result.append(ok);
        return;
      }
      const headline = document.createElement("p");
      headline.className = "check-bad";
      const count = answer.problems.length;
      headline.textContent = `${count} problem${count === 1 ? "" : "s"} to fix before submitting:`;
      const list = document.createElement("ul");
      list.className = "problems";
      for (const problem of answer.problems) {
        const item = document.createElement("li");
        if (problem.line != null) {
          const jump = document.createElement("button");
          jump.type = "button";
          jump.className = "link";
          jump.dataset.gotoLine = String(problem.line);
          jump.textContent = `line ${problem.line}` + (problem.column ? `, column ${problem.column}` : "");
          item.append(jump, ": ");
        }
        if (problem.path) {
          const path = document.createElement("code");
          path.textContent = problem.path;
          item.append(path, ": ");
        }
        item.append(problem.message);
        list.append(item);
      }
      result.append(headline, list);
    }

    // Parameter fields follow the YAML; a value the user typed is kept.
    function showParameters(parameters) {
      const container = fieldset.querySelector(".parameter-fields");
      const typed = new Map();
      container.querySelectorAll("input").forEach((input) => {
        if (input.value !== input.defaultValue) typed.set(input.name, input.value);
      });
      container.replaceChildren();
      parameters.forEach((parameter, index) => {
        const field = document.createElement("div");
        field.className = "field";
        const label = document.createElement("label");
        label.htmlFor = `parameter-${index + 1}`;
        label.textContent = parameter.name;
        const input = document.createElement("input");
        input.id = label.htmlFor;
        input.name = `parameter.${parameter.name}`;
        input.defaultValue = parameter.value;
        input.value = typed.has(input.name) ? typed.get(input.name) : parameter.value;
        if (!parameter.editable) {
          input.readOnly = true;
          input.title = "Edit this value in the YAML";
        }
        field.append(label, input);
        container.append(field);
      });
      fieldset.hidden = parameters.length === 0;
    }

    async function check() {
      if (checking) checking.abort();
      checking = new AbortController();
      try {
        const response = await fetch(editor.dataset.checkUrl, {
          method: "POST",
          body: textarea.value,
          headers: { ...window.pai.SCRIPT_HEADERS, "Content-Type": "text/yaml", "X-CSRF-Token": csrf },
          signal: checking.signal,
        });
        const answer = await response.json();
        if (!response.ok) {
          problems = [];
          showResult({ problems: [{ line: null, path: "", message: answer.message }] });
        } else {
          problems = answer.problems;
          showResult(answer);
          showParameters(answer.parameters);
        }
        paint();
      } catch (error) {
        if (error.name !== "AbortError") {
          result.textContent = `The job could not be checked (${error.message}); it is checked again when submitted.`;
        }
      }
    }

    textarea.addEventListener("input", () => {
      paint();
      clearTimeout(timer);
      timer = setTimeout(check, CHECK_DELAY_MS);
    });
    textarea.addEventListener("scroll", follow);
    document.addEventListener("click", (event) => {
      const jump = event.target.closest("[data-goto-line]");
      if (jump) goToLine(Number(jump.dataset.gotoLine));
    });
    paint();
    check();
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll(".editor").forEach(setUp);
  });
})();
