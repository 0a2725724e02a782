# nodeqos image: the agent (DaemonSet), the descheduler and the scheduler extender (Deployments).
# No container engine runs on the development machines; build it where one does:
#   docker build -t <registry>/nodeqos:0.1.0 . && docker push <registry>/nodeqos:0.1.0
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent agent
COPY qosmanager qosmanager
COPY metriccache metriccache
COPY descheduler descheduler
COPY extender extender
COPY kube kube
COPY cgroups cgroups
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 65532 nodeqos
# The agent runs privileged (cgroup writes); the descheduler runs as this user.
USER 65532
ENTRYPOINT []
CMD ["nodeqos-agent", "--help"]
