# nodeqos developer entry points. The two that matter:
#   make demo   — the end-to-end demo on a local control plane
#   make test   — the whole test suite (lint, types, tests); .ci/run calls it
# Both set up everything they need (hack/with-env.sh), cached outside the repo.

ENV := hack/with-env.sh
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck unit bench soak control-plane clean-cache

demo:
	$(ENV) python hack/demo

test:
	$(ENV) sh -c 'ruff check . && ruff format --check . && mypy && pytest $(PYTEST_ARGS)'

lint:
	$(ENV) sh -c 'ruff check . && ruff format --check .'

typecheck:
	$(ENV) mypy

unit:
	$(ENV) pytest -m 'not controlplane and not slow' $(PYTEST_ARGS)

bench:
	$(ENV) python -m bench

# The 15-minute chaos soak (results in bench/results/local/soak.json).
soak:
	$(ENV) python -m bench soak --duration 900

control-plane:
	hack/build-control-plane.sh

clean-cache:
	rm -rf $${NODEQOS_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/nodeqos}
