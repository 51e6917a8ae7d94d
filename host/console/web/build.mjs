// Builds the console page into ../dist/: index.html, app.js, app.css,
// minified, without source maps. The output depends only on the sources and
// the locked packages, so `make console` can check the committed dist.
import { build } from "esbuild";
import { copyFile, mkdir, readFile, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, "src");
const dist = join(here, "..", "dist");

await mkdir(dist, { recursive: true });

// xtermUnderCSP rewrites xterm.js's two ways of styling that a strict CSP
// blocks: <style> elements (to src/cspstyle.js) and style="" attributes (to
// the CSSOM, which CSP allows). Each pattern must be found exactly, so a new
// xterm.js that styles differently fails the build instead of the page.
const xtermUnderCSP = {
  name: "xterm-under-csp",
  setup(b) {
    b.onLoad({ filter: /[\\/]@xterm[\\/]xterm[\\/]lib[\\/]xterm\.mjs$/ }, async (args) => {
      let code = await readFile(args.path, "utf8");
      const styleEls = /([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\.createElement\("style"\)/g;
      const n = (code.match(styleEls) || []).length;
      if (n !== 3) throw new Error(`xterm.mjs: expected 3 style elements, found ${n}`);
      code = code.replace(styleEls, "__cspStyle($1)");
      const attr = '_addStyle(t,e){t.setAttribute("style",`${t.getAttribute("style")||""}${e};`)}';
      if (!code.includes(attr)) throw new Error("xterm.mjs: _addStyle is not the one this build rewrites");
      code = code.replace(attr, "_addStyle(t,e){t.style.cssText+=`${e};`}");
      const shim = JSON.stringify(join(src, "cspstyle.js"));
      return { contents: `import { cspStyle as __cspStyle } from ${shim};\n${code}`, loader: "js" };
    });
  },
};

const common = {
  bundle: true,
  minify: true,
  sourcemap: false,
  logLevel: "warning",
  absWorkingDir: here,
  legalComments: "eof",
  charset: "utf8",
};

await build({
  ...common,
  entryPoints: [join(src, "main.js")],
  outfile: join(dist, "app.js"),
  format: "iife",
  plugins: [xtermUnderCSP],
  target: ["es2020"],
});

await build({
  ...common,
  entryPoints: [join(src, "app.css")],
  outfile: join(dist, "app.css"),
});

await copyFile(join(src, "index.html"), join(dist, "index.html"));

let total = 0;
for (const f of ["index.html", "app.js", "app.css"]) {
  const { size } = await stat(join(dist, f));
  total += size;
  console.log(`${f.padEnd(11)} ${size} bytes`);
}
console.log(`total       ${total} bytes`);
