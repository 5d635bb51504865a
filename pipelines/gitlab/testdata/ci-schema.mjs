// Prints GitLab's CI JSON schema (app/assets/javascripts/editor/schema/ci.json,
// as gitlab-ci-local's build embeds it in dist/index.js) as JSON: the object
// literal whose $id is https://gitlab.com/.gitlab-ci.yml, cut out by bracket
// matching and evaluated. It is the schema as GitLab published it, before
// gitlab-ci-local loosens a few patterns at start-up.
// Usage: node ci-schema.mjs .../gitlab-ci-local/dist/index.js
import { readFileSync } from "node:fs";

const src = readFileSync(process.argv[2], "utf8");
const mark = '$id:"https://gitlab.com/.gitlab-ci.yml"';
const at = src.indexOf(mark);
if (at < 0) {
  console.error(`${process.argv[2]}: no object with ${mark}`);
  process.exit(1);
}
const start = src.lastIndexOf("{", at);
let depth = 0, i = start, quote = "";
for (; i < src.length; i++) {
  const c = src[i];
  if (quote) {
    if (c === "\\") i++;
    else if (c === quote) quote = "";
    continue;
  }
  if (c === '"' || c === "'" || c === "`") quote = c;
  else if (c === "{" || c === "[") depth++;
  else if (c === "}" || c === "]") {
    depth--;
    if (depth === 0) break;
  }
}
const schema = new Function(`return (${src.slice(start, i + 1)});`)();
process.stdout.write(JSON.stringify(schema, null, 1) + "\n");
