// A terminal, shown read-only with xterm.js from the terminal's event stream
// (a repaint of the screen first, then live bytes). Attaching, after the
// person confirmed it, sends keystrokes through the attach token.

import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { api, urls } from "./api.js";
import { h } from "./dom.js";
import { stream } from "./sse.js";
import { toast } from "./ui.js";

const BASE_FONT = 13;

function decode(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function themeColors() {
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  return dark
    ? { background: "#0d1117", foreground: "#d6dde6", cursor: "#d6dde6", selectionBackground: "#3a4a63" }
    : { background: "#fbfcfd", foreground: "#1f2328", cursor: "#1f2328", selectionBackground: "#c8d7ee" };
}

export function openTerminal(container, owner, view, { onDetached, onEnded } = {}) {
  const host = h("div", { class: "term", testid: "terminal-view" });
  const status = h("div", { class: "muted small", testid: "terminal-status" }, "connecting…");
  container.replaceChildren(host, status);
  const term = new Terminal({
    cols: Math.max(view.cols || 80, 2),
    rows: Math.max(view.rows || 24, 1),
    disableStdin: true,
    cursorBlink: false,
    scrollback: 2000,
    fontSize: BASE_FONT,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    theme: themeColors(),
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);

  // The host fixes the terminal's size; the view keeps it and only shrinks the
  // font when those columns would not fit the width at hand.
  const fitFont = () => {
    const dims = fit.proposeDimensions();
    if (!dims || !dims.cols || !term.cols) return;
    // Columns that fit scale inversely with the font size.
    const f = term.options.fontSize;
    const size = Math.max(8, Math.min(BASE_FONT, Math.floor((dims.cols * f) / term.cols)));
    if (size !== f) term.options.fontSize = size;
  };
  requestAnimationFrame(fitFont);

  let token = "";
  let dataSub = null;
  let queue = "";
  let sending = false;
  const flush = async () => {
    if (sending || !queue || !token) return;
    sending = true;
    const data = queue;
    queue = "";
    try {
      await api.input(owner, view.id, token, data);
    } catch (e) {
      toast(`typing into terminal ${view.id}: ${e.message}`);
      detach();
    } finally {
      sending = false;
      if (queue) flush();
    }
  };
  const detach = () => {
    token = "";
    queue = "";
    if (dataSub) dataSub.dispose();
    dataSub = null;
    term.options.disableStdin = true;
    host.classList.remove("attached");
    status.textContent = status.textContent.replace(/ · attached.*$/, "");
    if (onDetached) onDetached();
  };

  const close = stream(
    urls.terminalStream(owner, view.id),
    {
      output: (d) => {
        if (d.b64) term.write(decode(d.b64));
      },
    },
    {
      giveUpAfter: 5,
      onOpen: () => {
        // Each connection begins with a repaint of the whole screen.
        term.reset();
        status.textContent = token ? "live · attached: typing goes to the terminal" : "live · read-only";
      },
      onStatus: (s) => {
        if (s !== "live") status.textContent = s;
      },
      onEnd: (d) => {
        detach();
        status.textContent = d.error ? `terminal stream stopped: ${d.error}` : "terminal closed";
        if (onEnded) onEnded();
      },
    },
  );

  return {
    close: () => {
      detach();
      close();
      term.dispose();
    },
    fit: () => requestAnimationFrame(fitFont),
    resize: (cols, rows) => {
      if (cols > 1 && rows > 0 && (cols !== term.cols || rows !== term.rows)) {
        term.resize(cols, rows);
        requestAnimationFrame(fitFont);
      }
    },
    attached: () => !!token,
    detach,
    attach: async () => {
      try {
        const r = await api.attach(owner, view.id);
        token = r.attach || "";
      } catch (e) {
        toast(`attach to terminal ${view.id}: ${e.message}`);
        return false;
      }
      if (!token) {
        toast(`attach to terminal ${view.id}: the host gave no token`);
        return false;
      }
      term.options.disableStdin = false;
      host.classList.add("attached");
      dataSub = term.onData((data) => {
        queue += data;
        flush();
      });
      status.textContent = "live · attached: typing goes to the terminal";
      term.focus();
      return true;
    },
  };
}
