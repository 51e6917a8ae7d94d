// xterm.js styles itself with <style> elements and style="" attributes, both
// of which the console's Content-Security-Policy (default-src 'self')
// forbids. The build (build.mjs) points xterm's style elements here: an
// element that is never a <style>, whose text goes into a constructed
// stylesheet adopted by the document, which CSP allows.

export function cspStyle(doc) {
  const el = doc.createElement("xterm-style");
  el.hidden = true;
  const sheet = new CSSStyleSheet();
  let text = "";
  doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
  Object.defineProperty(el, "textContent", {
    get: () => text,
    set: (v) => {
      text = String(v ?? "");
      sheet.replaceSync(text);
    },
  });
  const remove = el.remove.bind(el);
  el.remove = () => {
    doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
    remove();
  };
  return el;
}
