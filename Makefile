# nodeqos developer entry points. The two that matter:
#   make demo   — the end-to-end demo on a local control plane
#   make test   — the whole test suite (lint, types, docs site, tests); .ci/run calls it
# Both set up everything they need (hack/with-env.sh), cached outside the repo.

ENV := hack/with-env.sh
PYTEST_ARGS ?=
# make bench BENCH='--publish lownodeload': arguments of python -m bench
BENCH ?=

.PHONY: demo test test-under-load lint typecheck unit e2e e2e-matrix e2e-cgroupv2 bench soak control-plane node-setup host-setup clean-cache

demo:
	$(ENV) python hack/demo

# The docs site is built --strict into build/site (ignored): a broken link fails.
test:
	$(ENV) sh -c 'ruff check . && ruff format --check . && mypy && mkdocs build --strict --quiet --site-dir build/site && pytest $(PYTEST_ARGS)'

# make test beside stress-ng (installed if missing, stopped at the end whatever
# the outcome): what a shared, busy CI machine does to the suite. ~20+ minutes.
test-under-load:
	PYTEST_ARGS='$(PYTEST_ARGS)' hack/test-under-load.sh

lint:
	$(ENV) sh -c 'ruff check . && ruff format --check .'

typecheck:
	$(ENV) mypy

unit:
	$(ENV) pytest -m 'not controlplane and not slow and not cgroupv2vm' $(PYTEST_ARGS)

# Real nodes (kubelet + containerd per node) on this machine; needs root.
e2e:
	$(ENV) pytest -m e2e tests/e2e $(PYTEST_ARGS)

# The real-node e2e suite on every supported Kubernetes minor (1.34-1.37; MINORS=1.34,1.37
# picks some), each minor's binaries built once from hack/minor/ and cached; writes the
# table in docs/compatibility.md. About 25 minutes a minor, plus its first build.
MINORS ?=
e2e-matrix:
	$(ENV) python -m testbed.e2ematrix $(if $(MINORS),--minors $(MINORS)) -- $(PYTEST_ARGS)

# nodeqos on a real cgroup v2 kernel under systemd, in a QEMU VM (docs/cgroupv2-vm.md);
# builds the VM image first when it is not cached (hack/vm/build-image.sh); needs root.
e2e-cgroupv2:
	NODEQOS_VM_REQUIRED=1 $(ENV) pytest -m cgroupv2vm tests/cgroupv2vm $(PYTEST_ARGS)

bench:
	$(ENV) python -m bench $(BENCH)

# The 15-minute chaos soak (results in bench/results/local/soak.json).
soak:
	$(ENV) python -m bench soak --duration 900

control-plane:
	hack/build-control-plane.sh

node-setup:
	hack/node-setup.sh

host-setup:
	hack/host-setup.sh

clean-cache:
	rm -rf $${NODEQOS_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/nodeqos}
