# The /assist service. Build: docker build -t assist .   Run: docker run -p 8000:8000 assist

# Builder: install the project and its dependencies into a venv. Every
# dependency ships wheels, so no compiler is needed; the final stage copies only the venv.
FROM python:3.12-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /build
COPY pyproject.toml README.md ./
COPY app/ app/
COPY agents/ agents/
RUN /opt/venv/bin/pip install --no-cache-dir .

FROM python:3.12-slim
# The service's user owns no files: the code and the venv stay root's, read-only to it.
RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app
# Same base image as the builder, so the venv's python symlink points at the same interpreter.
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ASSIST_HOST=0.0.0.0 \
    ASSIST_PORT=8000 \
    ASSIST_SHUTDOWN_GRACE=8
# A grace of 8 s fits `docker stop`'s default 10 s: open streams end themselves with `error`
# and `done` before the kill. Give longer answers more with `docker run --stop-timeout 40
# -e ASSIST_SHUTDOWN_GRACE=30` (docker-compose.yml does so).
WORKDIR /srv
# `python -m` puts the working directory first on sys.path, so these copies are the
# ones imported: agents/ sits next to the code, as in a checkout.
COPY app/ app/
COPY agents/ agents/
# Numeric, so orchestrators can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000
# No curl in slim images; urlopen raises (exit 1) on a refused connection or a non-2xx answer.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os,sys,urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ASSIST_PORT', '8000'), timeout=3).status == 200 else 1)"]
# Exec form: python is PID 1 and gets SIGTERM itself, so uvicorn shuts down gracefully.
CMD ["python", "-m", "app", "serve"]
