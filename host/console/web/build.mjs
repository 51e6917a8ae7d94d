// Builds the console page into ../dist/: index.html, app.js, app.css,
// minified, without source maps. The output depends only on the sources and
// the locked packages, so `make console` can check the committed dist.
import { build } from "esbuild";
import { copyFile, mkdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, "src");
const dist = join(here, "..", "dist");

await mkdir(dist, { recursive: true });

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
