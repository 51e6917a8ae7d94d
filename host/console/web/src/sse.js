// Server-sent event streams that come back by themselves. Each (re)connection
// calls onOpen first, so a caller that replays from the start (job output,
// terminal repaint) can clear what it showed, and one that gets snapshots can
// fetch again what it may have missed.

// stream opens url and routes each named event's JSON to handlers[name].
// onStatus gets "connecting", "live" or "reconnecting". With giveUpAfter, that
// many failed connections in a row end the stream (onEnd gets {error}). It
// returns close().
export function stream(url, handlers, { onOpen, onStatus, onEnd, giveUpAfter = 0 } = {}) {
  let es = null;
  let timer = 0;
  let delay = 500;
  let failures = 0;
  let opened = false;
  let closed = false;
  const status = (s) => onStatus && onStatus(s);

  const connect = () => {
    if (closed) return;
    status(es ? "reconnecting" : "connecting");
    es = new EventSource(url, { withCredentials: true });
    es.addEventListener("open", () => {
      delay = 500;
      opened = true;
      status("live");
      if (onOpen) onOpen();
    });
    es.addEventListener("error", () => {
      if (closed) return;
      // Take reconnection in hand: the browser gives up for good on a
      // non-200 answer, and a replaying stream must be told it starts over.
      es.close();
      failures = opened ? 1 : failures + 1;
      opened = false;
      if (giveUpAfter && failures >= giveUpAfter) {
        close();
        if (onEnd) onEnd({ error: `cannot open the stream (${failures} tries)` });
        return;
      }
      status("reconnecting");
      clearTimeout(timer);
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
    for (const [name, f] of Object.entries(handlers)) {
      es.addEventListener(name, (ev) => {
        let data;
        try {
          data = JSON.parse(ev.data);
        } catch {
          return;
        }
        f(data);
      });
    }
    es.addEventListener("end", (ev) => {
      // The stream's subject ended: nothing more will come, do not reconnect.
      let data = {};
      try {
        data = JSON.parse(ev.data || "{}");
      } catch {
        /* keep {} */
      }
      close();
      if (onEnd) onEnd(data);
    });
  };

  const close = () => {
    closed = true;
    clearTimeout(timer);
    if (es) es.close();
  };

  connect();
  return close;
}
