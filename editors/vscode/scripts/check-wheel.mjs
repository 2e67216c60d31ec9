// `vsce package` runs this first (vscode:prepublish): the VSIX must carry the ghostfim wheel the
// extension installs into its own server (src/setup.ts). `make vsix` builds it into server/.
import { readdirSync } from 'node:fs';

let files = [];
try {
  files = readdirSync(new URL('../server/', import.meta.url));
} catch {
  // no server/ folder: reported below
}
const wheels = files.filter((name) => /^ghostfim-[^-]+-py3-none-any\.whl$/.test(name));
if (wheels.length !== 1) {
  process.stderr.write(
    `editors/vscode/server/ must hold exactly one ghostfim wheel (found ${wheels.length}): ` +
      'build the VSIX with `make vsix` at the top of the repository\n',
  );
  process.exit(1);
}
