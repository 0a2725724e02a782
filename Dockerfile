# nodeqos image: the agent (DaemonSet), the descheduler, the scheduler extender and the manager
# (Deployments).
#   docker build -t <registry>/nodeqos:0.1.0 . && docker push <registry>/nodeqos:0.1.0
# Without a registry (the e2e suite, hack/node-image.sh): a Debian base made by
# debootstrap with python3 and python3-venv, and buildah:
#   buildah bud --build-arg BASE_IMAGE=nodeqos.local/debian:bookworm -t nodeqos.local/nodeqos:dev .
# nodeqos lives in a virtual environment (/opt/nodeqos) so the same steps work
# on python:3.11-slim and on Debian's own python3, whose system site-packages
# refuse pip (PEP 668, "externally managed").
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent agent
COPY qosmanager qosmanager
COPY metriccache metriccache
COPY descheduler descheduler
COPY extender extender
COPY manager manager
COPY kube kube
COPY cgroups cgroups
RUN python3 -m venv /opt/build && /opt/build/bin/pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE_IMAGE}
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/nodeqos \
    && /opt/nodeqos/bin/pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 65532 nodeqos
ENV PATH=/opt/nodeqos/bin:$PATH
# nodeqos-manager --webhook-addr makes its serving certificate in-process (cryptography,
# a wheel of the dependencies): no openssl binary is needed.
# The agent runs privileged (cgroup writes); the descheduler runs as this user.
USER 65532
ENTRYPOINT []
CMD ["nodeqos-agent", "--help"]
