# syntax=docker/dockerfile:1
# Wovyr's container image: `wovyr serve` by default; `worker` and `db-upgrade` are the other
# entry points (deploy/entrypoint.sh). Build: podman build -t wovyr . (or docker build).
ARG PYTHON_VERSION=3.12

# --- build: a wheel of this tree, installed with every extra into a virtualenv ----------
FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN python -m venv /opt/wovyr \
 && /opt/wovyr/bin/pip install --no-compile ".[all]" \
 && /opt/wovyr/bin/python -m compileall -q /opt/wovyr/lib

# --- run: the virtualenv, a non-root user, /data for WOVYR_HOME -----------------------
FROM python:${PYTHON_VERSION}-slim
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="wovyr" \
      org.opencontainers.image.description="Durable execution for declarative YAML workflows" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/wovyr/wovyr" \
      org.opencontainers.image.documentation="https://github.com/wovyr/wovyr/tree/main/docs"
RUN groupadd --system --gid 10001 wovyr \
 && useradd --system --uid 10001 --gid wovyr --home-dir /data --shell /usr/sbin/nologin wovyr \
 && mkdir -p /data \
 && chown wovyr:wovyr /data \
 && chmod 0700 /data
COPY --from=build /opt/wovyr /opt/wovyr
COPY --chmod=0755 deploy/entrypoint.sh /usr/local/bin/wovyr-entrypoint
ENV PATH="/opt/wovyr/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    WOVYR_HOME=/data \
    WOVYR_HOST=0.0.0.0 \
    WOVYR_PORT=8080 \
    WOVYR_LOG_FORMAT=json
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8080 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["wovyr-entrypoint", "healthcheck"]
ENTRYPOINT ["wovyr-entrypoint"]
CMD ["serve"]
