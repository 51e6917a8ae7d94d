// Page-wide pieces: toasts, the in-page confirm dialog, keyed lists and the
// one-second ticker that moves every elapsed time and countdown.

import { h } from "./dom.js";

// toast reports an outcome; errors stay longer. Click to dismiss.
export function toast(message, kind = "error") {
  const box = document.getElementById("toasts");
  const el = h("div", { class: `toast toast-${kind}`, testid: "toast", role: kind === "error" ? "alert" : "status" }, message);
  el.addEventListener("click", () => el.remove());
  box.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 12000 : 5000);
  return el;
}

// reportErrors runs an action and turns a failure into a toast.
export async function reportErrors(what, f) {
  try {
    return await f();
  } catch (e) {
    toast(`${what}: ${e.message}`);
    return undefined;
  }
}

// confirm asks in a modal dialog (never window.confirm, which blocks the
// page); testid names the dialog, its buttons are testid-yes / testid-no.
export function confirm({ testid, title, text, detail, yes, no = "Cancel", danger = false }) {
  return new Promise((resolve) => {
    const dlg = h(
      "dialog",
      { class: "confirm", testid },
      h("h2", null, title),
      h("p", null, text),
      detail ? h("pre", { class: "confirm-detail" }, detail) : null,
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", testid: `${testid}-no`, on: { click: () => done(false) } }, no),
        h("button", { type: "button", class: danger ? "danger" : "primary", testid: `${testid}-yes`, on: { click: () => done(true) } }, yes),
      ),
    );
    let settled = false;
    const done = (answer) => {
      if (settled) return;
      settled = true;
      dlg.close();
      dlg.remove();
      resolve(answer);
    };
    dlg.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      done(false);
    });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// sync makes container hold one element per item, in order, keyed by key(item).
// make(item) returns {el, update(item), drop?()}; existing rows are updated in
// place so open viewers, focus and scroll positions survive a new snapshot.
export function sync(container, items, key, make) {
  if (!container._rows) container._rows = new Map();
  const rows = container._rows;
  const seen = new Set();
  let i = 0;
  for (const item of items) {
    const k = key(item);
    seen.add(k);
    let row = rows.get(k);
    if (!row) {
      row = make(item);
      rows.set(k, row);
    }
    row.update(item);
    if (container.children[i] !== row.el) container.insertBefore(row.el, container.children[i] || null);
    i++;
  }
  for (const [k, row] of rows) {
    if (seen.has(k)) continue;
    if (row.drop) row.drop();
    row.el.remove();
    rows.delete(k);
  }
}

// A browser keeps at most 6 connections to one server, and each open viewer
// holds an event stream: past MAX_VIEWERS, opening one closes the oldest, so
// the page's own stream and its requests always have room.
const MAX_VIEWERS = 3;
const viewers = [];

// claimViewer registers an open viewer's close function; the returned
// release forgets it (call it when the viewer closes by itself).
export function claimViewer(name, close) {
  const v = { name, close };
  viewers.push(v);
  while (viewers.length > MAX_VIEWERS) {
    const old = viewers.shift();
    old.close();
    toast(`closed ${old.name}: at most ${MAX_VIEWERS} outputs and terminals are shown at once`, "info");
  }
  return () => {
    const i = viewers.indexOf(v);
    if (i >= 0) viewers.splice(i, 1);
  };
}

const tickers = new Set();

// every registers f to run once a second; it returns the unregister function.
export function every(f) {
  tickers.add(f);
  return () => tickers.delete(f);
}

setInterval(() => {
  for (const f of tickers) f(Date.now());
}, 1000);
