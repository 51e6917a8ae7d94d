// Tiny DOM helpers. Everything that comes from the host goes in as text
// (textContent, attributes): nothing here ever parses a string as HTML.

// h builds an element: h("div", {class: "x", testid: "entry", data: {entry: id}, on: {click: f}}, ...children).
// Children are nodes, strings (inserted as text), or null/false (skipped).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "testid") el.dataset.testid = v;
      else if (k === "data") for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
      else if (k === "on") for (const [ev, f] of Object.entries(v)) el.addEventListener(ev, f);
      else if (k === "text") el.textContent = String(v);
      else if (k in el && typeof v !== "string") el[k] = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";

// s builds an SVG element with plain attributes.
export function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

// replace swaps el's children for the given ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// duration says a span of milliseconds briefly: 850ms, 12s, 3m 04s, 2h 05m, 3d 4h.
export function duration(ms) {
  if (!(ms >= 0)) ms = 0;
  if (ms < 1000) return `${Math.floor(ms)}ms`;
  const sec = Math.floor(ms / 1000);
  if (sec < 60) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min}m ${String(sec % 60).padStart(2, "0")}s`;
  const hr = Math.floor(min / 60);
  if (hr < 48) return `${hr}h ${String(min % 60).padStart(2, "0")}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

// clock shows an RFC 3339 time as local HH:MM:SS (the full time in a title).
export function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso ?? "");
  return d.toLocaleTimeString([], { hour12: false });
}
