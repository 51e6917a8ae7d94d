// The composition file's editor: a textarea with a line-number gutter, Check
// (problems listed and marked at their lines; a click puts the cursor there)
// and Apply (the host writes and applies the text only when it checks).

import { api } from "./api.js";
import { h } from "./dom.js";
import { toast } from "./ui.js";

export function mountEditor() {
  const fileEl = h("span", { class: "muted mono" });
  const dirtyEl = h("span", { class: "dirty", hidden: true }, "modified");
  const gutter = h("div", { class: "gutter", "aria-hidden": "true" });
  const area = h("textarea", {
    class: "code",
    testid: "composition-editor",
    spellcheck: "false",
    autocomplete: "off",
    wrap: "off",
    "aria-label": "composition file",
  });
  const check = h("button", { type: "button", testid: "composition-check", title: "Ctrl+Enter" }, "Check");
  const applyBtn = h("button", { type: "button", class: "primary", testid: "composition-apply" }, "Apply");
  const revert = h("button", { type: "button", title: "load the file as the host has it" }, "Revert");
  const result = h("div", { class: "result", testid: "composition-result", role: "status" });
  const problemsEl = h("ul", { class: "problems" });
  let loaded = "";
  let bad = new Set();

  const el = h(
    "div",
    { class: "panel editor" },
    h("div", { class: "panel-head" }, h("h2", null, "Composition file"), fileEl, dirtyEl),
    h("div", { class: "code-wrap" }, gutter, area),
    h("div", { class: "editor-actions" }, check, applyBtn, revert, result),
    problemsEl,
  );

  const renumber = () => {
    const n = area.value.split("\n").length;
    if (gutter.childElementCount !== n || bad.size) {
      const rows = [];
      for (let i = 1; i <= n; i++) rows.push(h("div", { class: bad.has(i) ? "bad" : null }, String(i)));
      gutter.replaceChildren(...rows);
    }
    gutter.scrollTop = area.scrollTop;
    dirtyEl.hidden = area.value === loaded;
  };
  area.addEventListener("input", renumber);
  area.addEventListener("scroll", () => {
    gutter.scrollTop = area.scrollTop;
  });
  area.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      if (!check.disabled) check.click();
      return;
    }
    // Tab indents with two spaces (YAML has no tabs) instead of leaving the field.
    if (ev.key === "Tab" && !ev.shiftKey && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
      ev.preventDefault();
      area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
      renumber();
    }
  });

  // goTo puts the cursor at line:col and scrolls it into view.
  const goTo = (line, col) => {
    const lines = area.value.split("\n");
    let off = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) off += lines[i].length + 1;
    const len = (lines[line - 1] || "").length;
    off += Math.max(0, Math.min((col || 1) - 1, len));
    area.focus();
    area.setSelectionRange(off, off);
    const lh = parseFloat(getComputedStyle(area).lineHeight) || 18;
    const want = (line - 1) * lh;
    if (want < area.scrollTop || want > area.scrollTop + area.clientHeight - 2 * lh) {
      area.scrollTop = Math.max(0, want - area.clientHeight / 3);
    }
    gutter.scrollTop = area.scrollTop;
  };

  const showProblems = (problems) => {
    bad = new Set(problems.map((p) => p.line).filter((l) => l > 0));
    gutter.replaceChildren();
    renumber();
    problemsEl.replaceChildren(
      ...problems.map((p) => {
        const where = `${p.file || "composition"}:${p.line || 0}`;
        const li = h(
          "li",
          { class: "problem", testid: "composition-problem", data: { line: p.line || 0 }, tabindex: "0", title: "go to the line" },
          `${where}: ${p.message}`,
        );
        const go = () => goTo(p.line || 1, p.col || 1);
        li.addEventListener("click", go);
        li.addEventListener("keydown", (ev) => {
          if (ev.key === "Enter") go();
        });
        return li;
      }),
    );
  };

  const setResult = (text, kind) => {
    result.textContent = text;
    result.dataset.kind = kind;
  };

  const busy = (on) => {
    check.disabled = on;
    applyBtn.disabled = on;
    revert.disabled = on;
  };

  check.addEventListener("click", async () => {
    busy(true);
    setResult("checking…", "pending");
    try {
      const r = await api.check(area.value);
      const problems = r.problems || [];
      showProblems(problems);
      setResult(problems.length ? `${plural(problems.length, "problem")}` : "No problems.", problems.length ? "bad" : "ok");
    } catch (e) {
      setResult(`Check failed: ${e.message}`, "bad");
      toast(`check: ${e.message}`);
    } finally {
      busy(false);
    }
  });

  applyBtn.addEventListener("click", async () => {
    busy(true);
    setResult("applying…", "pending");
    const text = area.value;
    try {
      const r = await api.apply(text);
      const problems = r.problems || [];
      showProblems(problems);
      if (r.applied) {
        loaded = text;
        renumber();
        setResult("Applied.", "ok");
        toast("composition applied", "info");
      } else if (problems.length) {
        setResult(`Not applied: ${plural(problems.length, "problem")}.`, "bad");
      } else {
        setResult(`Not applied: ${r.error || "the host gave no reason"}`, "bad");
        toast(`apply: ${r.error || "not applied"}`);
      }
    } catch (e) {
      setResult(`Not applied: ${e.message}`, "bad");
      toast(`apply: ${e.message}`);
    } finally {
      busy(false);
    }
  });

  const load = async () => {
    try {
      const c = await api.composition();
      loaded = c.text || "";
      area.value = loaded;
      fileEl.textContent = c.file || "";
      showProblems([]);
      setResult("", "");
    } catch (e) {
      if (e.status !== 401) toast(`loading the composition: ${e.message}`);
    }
  };
  revert.addEventListener("click", () => {
    busy(true);
    load().finally(() => busy(false));
  });

  renumber();
  return { el, load };
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
