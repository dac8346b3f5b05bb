# shellcheck shell=bash
# The Python client, clients/python (distribution prioq-client, package
# prioq_client): generated from openapi/openapi.json by
# openapi-python-client, but for the files in python_hand_written. The
# generator, the ruff it formats its output with, and everything they run
# on are pinned here and installed into .prioq/venv-gen.
# Sourced by scripts/gen-clients and scripts/e2e-test after scripts/lib.sh.
# shellcheck disable=SC2154 # prioq_root comes from scripts/lib.sh

# The files of clients/python written by hand, kept on regeneration.
# shellcheck disable=SC2034 # read by scripts/gen-clients
python_hand_written=(
  README.md
  generator.yaml
  prioq_client/worker.py
  prioq_client/producer.py
)

python_package="$prioq_root/clients/python"

# Exact versions of httpx and attrs, with what they import: the generated
# client runs on them, and so does the generator.
python_http_pins=(
  anyio==4.16.0
  attrs==26.1.0
  certifi==2026.10.19.post1
  h11==0.16.0
  httpcore==1.0.9
  httpx==0.28.1
  idna==3.20
  typing-extensions==4.16.0
)

# Exact versions of the generator and of all it imports: ruff formats the
# generated files and Jinja renders them, so another version of either could
# write other bytes.
python_generator_pins=(
  openapi-python-client==0.29.1
  ruff==0.17.6
  "${python_http_pins[@]}"
  annotated-doc==0.0.7
  annotated-types==0.8.0
  jinja2==3.1.6
  markdown-it-py==4.3.0
  markupsafe==3.0.4
  mdurl==0.1.2
  pydantic==2.14.4
  pydantic-core==2.50.5
  pygments==2.21.0
  rich==15.0.0
  ruamel.yaml==0.19.1
  shellingham==1.5.4
  typer==0.27.3
  typing-inspection==0.4.5
)

# The client's dependencies in .prioq/venv-clients, and the build backend
# its pyproject.toml names (poetry-core): the client then installs with no
# build isolation, so with nothing left to chance and no download.
# OpenTelemetry's API and SDK too: the worker helper's spans are tested
# with the SDK's in-memory exporter (tests/e2e/worker_spans.py); the
# client needs neither.
python_client_pins=(
  "${python_http_pins[@]}"
  poetry-core==2.5.0
  opentelemetry-api==1.45.2
  opentelemetry-sdk==1.45.2
  opentelemetry-semantic-conventions==0.66b2
)

# Makes the virtual environment $1 (with Python 3.11 or later: the
# generator and the generated client need it) and installs the packages
# named after $2 (what they are, for the message), unless the very same
# list is installed there already.
ensure_python_pins() {
  local venv="$1" what="$2" pins
  shift 2
  pins="$(printf '%s\n' "$@")"
  ensure_python_venv "$venv"
  "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "needs Python 3.11 or later, found $("$venv/bin/python" --version 2>&1) in $venv; install a newer python3, remove $venv and run this again"
  [ -f "$venv/prioq-pins.txt" ] && [ "$(cat "$venv/prioq-pins.txt")" = "$pins" ] && return 0
  say "installing $what into ${venv#"$prioq_root"/}"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" ||
    die "pip could not install the pinned packages into $venv"
  printf '%s\n' "$pins" >"$venv/prioq-pins.txt"
}

# Writes the generated files of the Python client into the empty folder $1,
# laid out as in clients/python: pyproject.toml (meta "poetry": pip builds
# it with poetry-core, fetched from PyPI, and writes nothing into the
# source folder), .gitignore and the package prioq_client.
generate_python() {
  local out="$1" venv="$prioq_root/.prioq/venv-gen"
  ensure_python_pins "$venv" "openapi-python-client 0.29.1 (pinned, with ruff)" "${python_generator_pins[@]}"
  # The generator runs the post hooks of generator.yaml by name, so the
  # pinned ruff goes first on PATH; --fail-on-warning turns a ruff it cannot
  # find into a failure instead of unformatted files. A fixed hash seed
  # keeps any set's order, so the output, the same from run to run.
  PATH="$venv/bin:$PATH" PYTHONHASHSEED=0 "$venv/bin/openapi-python-client" generate \
    --path "$prioq_root/openapi/openapi.json" \
    --config "$python_package/generator.yaml" \
    --meta poetry --output-path "$out" --overwrite --fail-on-warning >/dev/null ||
    die "openapi-python-client failed on openapi/openapi.json"
  # The generated README is Poetry boilerplate; clients/python keeps one
  # written by hand.
  rm -f "$out/README.md"
}

# Installs the Python client, with its pinned dependencies, into
# .prioq/venv-clients, and exports PRIOQ_PYTHON, that environment's python
# (examples/worker.py and examples/call_and_wait.py run on it).
setup_python_client() {
  local venv="$prioq_root/.prioq/venv-clients"
  ensure_python_pins "$venv" "the Python client's pinned dependencies" "${python_client_pins[@]}"
  # The client itself on every run: a second or two, and never stale.
  say "installing the Python client (clients/python) into .prioq/venv-clients"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation --force-reinstall "$python_package" ||
    die "pip could not install clients/python into $venv"
  export PRIOQ_PYTHON="$venv/bin/python"
}
