# The /assist service. Build: docker build -t sentient-assist .
# Run: docker run -p 8000:8000 --stop-timeout 40 -e ASSIST_SHUTDOWN_GRACE=30 sentient-assist

# Builder: install the project and its dependencies into a venv. Every dependency ships
# wheels, so no compiler is needed. The venv is made without pip (the base image's pip
# installs into it), so the final stage, which copies only the venv, holds no installer.
FROM python:3.12-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv --without-pip /opt/venv
WORKDIR /build
COPY pyproject.toml README.md LICENSE ./
COPY sentient_assist/ sentient_assist/
RUN pip --python /opt/venv/bin/python install --no-cache-dir .

FROM python:3.12-slim
# The service's user owns no files: the code and the venv stay root's, read-only to it.
# The base image's pip and the wheels ensurepip carries go: nothing here installs at run time.
RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app \
 && python -m pip uninstall --no-cache-dir -y -q pip \
 && rm -rf /usr/local/lib/python3.12/ensurepip /root/.cache
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
# The installed package holds the code; the agents are files the registry reads from the
# working directory's agents/ (ASSIST_AGENTS_DIR), as in a checkout.
WORKDIR /srv
COPY agents/ agents/
# Numeric, so orchestrators can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000
# No curl in slim images; urlopen raises (exit 1) on a refused connection or a non-2xx answer.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os,sys,urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ASSIST_PORT', '8000'), timeout=3).status == 200 else 1)"]
# Exec form: python is PID 1 and gets SIGTERM itself, so uvicorn shuts down gracefully.
CMD ["python", "-m", "sentient_assist", "serve"]
