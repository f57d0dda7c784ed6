# The two commands of the README. Each sets up everything it needs first.
#   make demo    4 simulated GPU servers + the console (ARGS="--screenshot out.png" offscreen)
#   make test    lint, layer contracts and the whole test suite
#   make package the sdist, the wheel and the Debian package gpufleet-daemon, in dist/
VENV ?= .venv
ARGS ?=

.PHONY: demo test lint bench clean package

demo:
	installer/dev-setup.sh demo
	$(VENV)/bin/gpufleet demo $(ARGS)

test:
	installer/dev-setup.sh test
	installer/run-tests.sh

package:
	installer/package.sh

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy node_daemon console

bench:
	installer/dev-setup.sh test
	bench/run_all.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
