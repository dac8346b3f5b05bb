# shellcheck shell=bash
# The TypeScript client, clients/typescript (npm package prioq-client): its
# src/schema.ts is generated from openapi/openapi.json by openapi-typescript;
# the rest of the package is written by hand. The generator, the compiler
# and the runtime (openapi-fetch) are pinned in the package's package.json
# and package-lock.json, and installed into its node_modules.
# Sourced by scripts/gen-clients and scripts/e2e-test after scripts/lib.sh.
# shellcheck disable=SC2154 # prioq_root comes from scripts/lib.sh

# The files of clients/typescript written by hand, kept on regeneration.
# shellcheck disable=SC2034 # read by scripts/gen-clients
typescript_hand_written=(
  .gitignore
  README.md
  package.json
  package-lock.json
  tsconfig.json
  tsconfig.browser.json
  src/index.ts
  src/node.ts
  src/worker.ts
  src/producer.ts
  test/worker.test.mjs
  test/spans.test.mjs
  test/producer.test.mjs
)

typescript_package="$prioq_root/clients/typescript"

# True when the package's node_modules holds the openapi-typescript that
# its package.json pins.
typescript_generator_installed() {
  (cd "$typescript_package" && node -e '
    const pinned = require("./package.json").devDependencies["openapi-typescript"];
    const installed = require("./node_modules/openapi-typescript/package.json").version;
    process.exit(installed === pinned ? 0 : 1);
  ' 2>/dev/null)
}

# Installs the package's pinned tools (npm ci, from package-lock.json) into
# its node_modules unless the pinned openapi-typescript is already there.
# No build: a stale schema must not stop its own regeneration.
install_typescript_generator() {
  typescript_generator_installed && return 0
  say "installing openapi-typescript (npm ci in clients/typescript)"
  (cd "$typescript_package" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null) ||
    die "npm ci failed in clients/typescript"
  typescript_generator_installed ||
    die "npm ci did not install the openapi-typescript that clients/typescript/package.json pins"
}

# Writes the generated files of the TypeScript client into the empty folder
# $1, laid out as in clients/typescript: src/schema.ts, the types of every
# path, operation and schema of openapi/openapi.json.
generate_typescript() {
  local out="$1"
  ensure_node 20
  install_typescript_generator
  mkdir -p "$out/src"
  # Run in the package, where no redocly.yaml is: openapi-typescript would
  # read one from the current folder. To stdout, which has no banner.
  (cd "$typescript_package" &&
    node_modules/.bin/openapi-typescript "$prioq_root/openapi/openapi.json" >"$out/src/schema.ts") ||
    die "openapi-typescript failed on openapi/openapi.json"
}

# Installs the TypeScript client's dependencies and builds it into
# clients/typescript/dist (examples/worker.mjs imports it from there), and
# exports PRIOQ_TS_CLIENT, the built entry point.
setup_typescript_client() {
  ensure_node 20
  say "installing and building the TypeScript client (clients/typescript)"
  (cd "$typescript_package" &&
    npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
    npm run --silent build) ||
    die "could not install and build the TypeScript client in clients/typescript"
  [ -f "$typescript_package/dist/index.js" ] ||
    die "no clients/typescript/dist/index.js after npm run build"
  export PRIOQ_TS_CLIENT="$typescript_package/dist/index.js"
}
