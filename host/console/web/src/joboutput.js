// A job's output, live: the job's own event stream from the start of its
// output, kept scrolled to the end unless the reader scrolled up.

import { urls } from "./api.js";
import { h } from "./dom.js";
import { stream } from "./sse.js";

// Output past this many characters is trimmed from the front, so a chatty job
// cannot make the page heavy.
const MAX_CHARS = 2_000_000;

export function openJobOutput(container, owner, id, onEnded) {
  const out = h("pre", { class: "output", testid: "job-output", tabindex: "0" });
  const status = h("div", { class: "muted small", testid: "job-output-status" }, "connecting…");
  container.replaceChildren(out, status);
  let text = "";
  const atEnd = () => out.scrollHeight - out.scrollTop - out.clientHeight < 24;
  const show = () => {
    const follow = atEnd();
    out.textContent = text;
    if (follow) out.scrollTop = out.scrollHeight;
  };
  let pending = false;
  const close = stream(
    urls.jobOutput(owner, id),
    {
      output: (d) => {
        text += d.text || "";
        if (text.length > MAX_CHARS) text = text.slice(text.length - MAX_CHARS);
        // Coalesce a burst of chunks into one repaint.
        if (!pending) {
          pending = true;
          requestAnimationFrame(() => {
            pending = false;
            show();
          });
        }
      },
    },
    {
      giveUpAfter: 5,
      onOpen: () => {
        // The stream starts from the job's first byte each time it connects.
        text = "";
        out.textContent = "";
        status.textContent = "live";
      },
      onStatus: (s) => {
        if (s !== "live") status.textContent = s;
      },
      onEnd: (d) => {
        show();
        status.textContent = d.error
          ? `output stopped: ${d.error}`
          : `ended: ${d.state || "done"}${d.exitCode !== undefined && d.exitCode !== null ? `, exit code ${d.exitCode}` : ""}`;
        if (onEnded) onEnded();
      },
    },
  );
  return { close };
}
